"""`queuectl schedule`: periodic jobs, made by every running pool one per tick."""

from __future__ import annotations

import json
import os
from typing import Any

import typer

from .. import schedule_ops
from ..errors import InvalidInput
from ..models import local_operator
from .context import EXIT_USAGE, fail, guarded, open_store, print_json, state
from .output import Output, chosen, output_option

app = typer.Typer(
    help="Periodic jobs: add a schedule (cron or @every), list, show, pause, resume, remove, "
    "or run one now. Every running pool makes their jobs, one per tick.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
CLI = "cli"
# The flag that gives each field of a schedule, for the errors that name a field.
FLAGS = {
    "cron": "--cron",
    "every": "--every",
    "timezone": "--timezone",
    "catch_up": "--catch-up",
    "command": "--command",
    "type": "--type",
    "payload": "--payload",
    "queue": "--queue",
    "priority": "--priority",
    "timeout": "--timeout",
    "max_retries": "--max-retries",
    "cwd": "--cwd",
    "env": "--env",
    "name": "NAME",
}


def _number(text: str | None, kind: type[int] | type[float]) -> object:
    """A number given as text, or the text itself: the validator then says what is wrong."""
    if text is None:
        return None
    try:
        return kind(text.strip())
    except ValueError:
        return text


def _fields(
    cron: str | None,
    every: str | None,
    timezone: str | None,
    catch_up: str | None,
    command: str | None,
    job_type: str | None,
    payload: str | None,
    queue: str | None,
    priority: str | None,
    timeout: str | None,
    max_retries: str | None,
    cwd: str | None,
    env_pairs: list[str],
) -> dict[str, Any]:
    """The options as a schedule's fields (the config file's form), unset ones left out."""
    env: dict[str, str] | None = None
    for pair in env_pairs:
        name, equals, value = pair.partition("=")
        if not equals:
            fail(f"--env takes NAME=VALUE, not {pair!r}", EXIT_USAGE)
        env = (env or {}) | {name: value}
    decoded: object = None
    if payload is not None:
        try:
            decoded = json.loads(payload)
        except (json.JSONDecodeError, RecursionError):
            fail('--payload must be JSON text such as \'{"to": "ops"}\'', EXIT_USAGE)
    fields = {
        "cron": cron,
        "every": every,
        "timezone": timezone,
        "catch_up": catch_up,
        "command": command,
        "type": job_type,
        "payload": decoded,
        "queue": queue,
        "priority": _number(priority, int),
        "timeout": _number(timeout, float),
        "max_retries": _number(max_retries, int),
        "cwd": None if cwd is None else os.path.abspath(cwd),
        "env": env,
    }
    return {key: value for key, value in fields.items() if value is not None}


def _flagged(error: InvalidInput) -> str:
    """The error with the fields it names written as the flags that give them."""
    message = str(error)
    for field, flag in FLAGS.items():
        message = message.replace(f"field '{field}'", flag).replace(f"'{field}'", flag)
    return message


@app.command("add")
@guarded
def add(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="1-100 characters, no spaces."),
    cron: str | None = typer.Option(
        None,
        "--cron",
        metavar="EXPR",
        help="Five cron fields ('0 2 * * *'), an alias (@hourly, @daily, @weekly, "
        "@monthly, @yearly) or '@every 5m'.",
    ),
    every: str | None = typer.Option(
        None, "--every", metavar="DURATION", help="Every 30s, 5m, 1h30m, 1d (instead of --cron)."
    ),
    timezone: str | None = typer.Option(
        None, "--timezone", "--tz", metavar="ZONE", help="Read --cron in this zone (default UTC)."
    ),
    command: str | None = typer.Option(None, "--command", "-c", help="The job's shell command."),
    job_type: str | None = typer.Option(
        None, "--type", metavar="TYPE", help="A job type of config.json instead of a command."
    ),
    payload: str | None = typer.Option(
        None, "--payload", metavar="JSON", help="The typed job's payload."
    ),
    queue: str | None = typer.Option(None, "--queue", "-q", metavar="NAME"),
    priority: str | None = typer.Option(None, "--priority", metavar="N"),
    timeout: str | None = typer.Option(None, "--timeout", metavar="SECONDS"),
    max_retries: str | None = typer.Option(None, "--max-retries", metavar="N"),
    cwd: str | None = typer.Option(
        None, "--cwd", metavar="DIR", help="Run the jobs in this directory (made absolute here)."
    ),
    env_pairs: list[str] = typer.Option(
        [], "--env", metavar="NAME=VALUE", help="Set this in the jobs' environment (repeat)."
    ),
    catch_up: str | None = typer.Option(
        None,
        "--catch-up",
        metavar="POLICY",
        help="Ticks missed while no pool ran: none (skip them), one (the latest, default) "
        "or all (each, 1,000 a round).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the schedule as JSON."),
) -> None:
    """Add a schedule: each of its ticks makes one job, whichever pool fires it.

    Its first tick is the next one after now.

    Examples: queuectl schedule add nightly --cron "0 2 * * *" --timezone Europe/Berlin
    --command ./nightly.sh; queuectl schedule add ping --every 30s --command "curl -fsS host"
    """
    fields = _fields(
        cron,
        every,
        timezone,
        catch_up,
        command,
        job_type,
        payload,
        queue,
        priority,
        timeout,
        max_retries,
        cwd,
        env_pairs,
    )
    settings = state(ctx).settings
    try:
        with open_store(ctx) as store:
            view = schedule_ops.add_schedule(store, settings, name, fields, local_operator(CLI))
            now = store.now()
    except InvalidInput as error:
        fail(_flagged(error), EXIT_USAGE)
    if as_json:
        print_json(view.to_dict())
        return
    from . import schedule_render

    schedule_render.added(view, now)


@app.command("list")
@guarded
def list_schedules(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array only."),
    output: str | None = output_option(),
) -> None:
    """Every schedule: its timing in words, time zone, next job, last job, origin.

    Example: queuectl schedule list
    """
    mode = chosen(output, as_json)
    with open_store(ctx) as store:
        views = schedule_ops.list_schedules(store)
        now = store.now()
    if mode is Output.JSON:
        print_json([view.to_dict() for view in views])
        return
    from . import render, schedule_render

    empty = "No schedules yet: queuectl schedule add NAME --cron EXPR --command CMD"
    render.show(schedule_render.table(views, now), mode is Output.PLAIN, empty)


@app.command("show")
@guarded
def show(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME"),
    as_json: bool = typer.Option(False, "--json", help="Print the schedule as JSON."),
) -> None:
    """One schedule in full, with its job's fields and its last job.

    Example: queuectl schedule show nightly
    """
    with open_store(ctx) as store:
        view = schedule_ops.get_schedule(store, name)
        now = store.now()
    if as_json:
        print_json(view.to_dict())
        return
    from . import render, schedule_render

    schedule_render.detail(view, now, render.console())


@app.command("pause")
@guarded
def pause(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME")) -> None:
    """Pause a schedule: no pool fires it until it is resumed (stored, across restarts).

    Example: queuectl schedule pause nightly
    """
    with open_store(ctx) as store:
        view = schedule_ops.pause_schedule(store, name, local_operator(CLI))
    print(f"Schedule {_shown(view.name)} paused: no job until `queuectl schedule resume`")


@app.command("resume")
@guarded
def resume(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME")) -> None:
    """Resume a paused schedule from its next tick after now (the paused ones are not made).

    Example: queuectl schedule resume nightly
    """
    with open_store(ctx) as store:
        view = schedule_ops.resume_schedule(store, name, local_operator(CLI))
        now = store.now()
    from . import schedule_render

    print(f"Schedule {_shown(view.name)} resumed; {schedule_render.next_words(view, now)}")


@app.command("remove")
@guarded
def remove(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME")) -> None:
    """Remove a schedule; the jobs it made stay.

    Example: queuectl schedule remove nightly
    """
    with open_store(ctx) as store:
        gone = schedule_ops.remove_schedule(store, name, local_operator(CLI))
    note = ""
    if gone.origin == "config":
        note = "; the config file declares it: a pool started with that file adds it again"
    print(f"Schedule {_shown(gone.name)} removed (its jobs stay){note}")


@app.command("run")
@guarded
def run(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME"),
    quiet: bool = typer.Option(False, "--quiet", help="Print only the job id."),
    as_json: bool = typer.Option(False, "--json", help="Print the job as JSON."),
) -> None:
    """Make one job of the schedule now, outside its ticks (they go on as before).

    Example: queuectl schedule run nightly
    """
    settings = state(ctx).settings
    with open_store(ctx) as store:
        job = schedule_ops.run_schedule(store, settings, name, local_operator(CLI))
    if as_json:
        print_json(job.to_dict())
    elif quiet:
        print(job.id)
    else:
        print(f"Enqueued job {_shown(job.id)} from schedule {_shown(name)}")


def _shown(text: str) -> str:
    from ..display import printable

    return printable(text, single_line=True)
