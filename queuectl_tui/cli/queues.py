"""Named queues: their depth and settings, pause and resume, and limits on running jobs."""

from __future__ import annotations

import typer

from .. import control
from ..models import queue_limit_text
from .context import EXIT_USAGE, fail, guarded, open_store, print_json, queue_option
from .output import Output, chosen, output_option

app = typer.Typer(
    help="Named queues: list them, pause and resume them, limit how many of their jobs run.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
CLI = "cli"


@app.command("list")
@guarded
def list_queues(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array only."),
    output: str | None = output_option(),
) -> None:
    """Every queue with its waiting and running jobs, paused flag, limit and the age of its
    longest-waiting job.

    Example: queuectl queue list
    """
    mode = chosen(output, as_json)
    with open_store(ctx) as store:
        queues = control.queue_overview(store)
        now = store.now()
    if mode is Output.JSON:
        print_json([queue.to_dict(now) for queue in queues])
        return
    from . import render

    empty = "No queues yet: a job's queue is made when the first job names it."
    render.show(render.queues_table(queues, now), mode is Output.PLAIN, empty)


def _set_paused(ctx: typer.Context, name: str, paused: bool) -> str:
    """Pause or resume the queue NAME names; returns the checked name."""
    name = queue_option(name, "NAME")
    with open_store(ctx) as store:
        control.set_paused(store, name, paused, control.local_operator(CLI))
    return name


@app.command("pause")
@guarded
def pause(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME")) -> None:
    """Pause a queue: no pool claims its jobs until it is resumed (running ones finish).
    Stored: it stays paused across restarts.

    Example: queuectl queue pause reports
    """
    name = _set_paused(ctx, name, True)
    print(f"Queue {name} paused: its jobs wait until `queuectl queue resume {name}`")


@app.command("resume")
@guarded
def resume(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME")) -> None:
    """Resume a paused queue.

    Example: queuectl queue resume reports
    """
    name = _set_paused(ctx, name, False)
    print(f"Queue {name} resumed")


@app.command("limit")
@guarded
def limit(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME"),
    count: str = typer.Argument(..., metavar="N", help="A number of jobs, or 'none'."),
) -> None:
    """At most N jobs of the queue run at once, over every pool on every host ('none' lifts
    the limit).

    Example: queuectl queue limit reports 2
    """
    name = queue_option(name, "NAME")
    try:
        chosen = queue_limit_text(count)
    except ValueError:
        fail(f"N must be a number of jobs or 'none', not {count!r}", EXIT_USAGE)
    with open_store(ctx) as store:
        control.set_limit(store, name, chosen, control.local_operator(CLI))
    if chosen is None:
        print(f"Queue {name} has no limit")
    else:
        print(f"At most {chosen} job{'s' if chosen != 1 else ''} of queue {name} run at once")
