"""`queuectl enqueue`: a job the way people type it (options, a command string, `-- CMD ARGS`,
or JSON), or many from a file or a pipe; every form goes through the one validator."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from .. import service
from ..models import ENV_NAME, JobDefaults, JobSpecError, JobState
from .context import EXIT_USAGE, fail, guarded, open_store, print_json, state

# What follows `--` on the command line: the job's command as words, each quoted when joined.
_WORDS_KEY = "queuectl.command_words"


class _DashDashCommand(TyperCommand):
    """Keeps the words after `--` apart: they are the command's argv, never JSON or options."""

    # (typer's vendored click Context; typer.Context is its subclass, too narrow to override)
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta[_WORDS_KEY] = args[cut + 1 :]
            args = args[:cut]
        return super().parse_args(ctx, args)


def _read_input(path: str | None) -> str:
    """The whole input (`None` or '-': stdin), decoded strictly as UTF-8."""
    source = "stdin" if path in (None, "-") else path
    try:
        data = sys.stdin.buffer.read() if source == "stdin" else Path(source).read_bytes()
    except FileNotFoundError:
        fail(f"file not found: {path}", EXIT_USAGE)
    except OSError as error:
        fail(f"cannot read {source}: {error}", EXIT_USAGE)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        fail(f"{source} is not valid UTF-8 text (byte {error.start + 1})", EXIT_USAGE)


def _stdin_is_piped() -> bool:
    try:
        return not os.isatty(sys.stdin.fileno())
    except (AttributeError, ValueError, OSError):  # no stdin at all, or a closed one
        return False


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _job_defaults(
    delay: str | None,
    cwd: str | None,
    pairs: list[str],
    capture: bool,
    after: list[str],
    after_any_end: bool,
) -> JobDefaults:
    """The enqueue flags as defaults for the jobs, or a usage error naming the flag."""
    env: dict[str, str] | None = None
    if capture:
        # What a job may not set (QUEUECTL_*, bash's exported functions) stays the pool's.
        env = {
            k: v
            for k, v in os.environ.items()
            if ENV_NAME.fullmatch(k) and not k.startswith("QUEUECTL_")
        }
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals:
            fail(f"--env takes NAME=VALUE, not {pair!r}", EXIT_USAGE)
        env = (env or {}) | {name: value}
    try:
        return JobDefaults.of(
            delay,
            None if cwd is None else os.path.abspath(cwd),
            env,
            ",".join(after) if after else None,
            after_any_end,
        )
    except JobSpecError as error:
        field = error.field or "env"
        fail(str(error).replace(f"field '{field}'", _flag(field)), EXIT_USAGE)


def _job_object(
    words: list[str], after_dash: list[str] | None, fields: dict[str, Any]
) -> dict[str, Any]:
    """The job as a JSON object: from JSON text, a command string, or the words after `--`,
    with the fields given as options. A field given both ways is refused."""
    if after_dash is not None and words:
        fail("give the command either after -- or before it, not both", EXIT_USAGE)
    if after_dash is not None:
        if not after_dash:
            fail("no command after --", EXIT_USAGE)
        job: dict[str, Any] = {"command": shlex.join(after_dash)}
        source = "the words after --"
    elif len(words) > 1 and words[0].lstrip().startswith("{"):
        # `queuectl enqueue {"command": "x"}` unquoted reaches us as words: not a command.
        fail("the JSON job is split into words: quote it as one argument", EXIT_USAGE)
    elif len(words) == 1 and service.is_json_job_text(words[0]):
        try:
            decoded = service.decode_json(words[0])
        except service.InputError as error:
            hint = "; a shell command that starts with { goes after -- or in --command"
            fail(str(error) + (hint if words[0].lstrip().startswith("{") else ""), EXIT_USAGE)
        if not isinstance(decoded, dict):
            fail("a job must be a JSON object", EXIT_USAGE)
        job = decoded
        source = "the JSON job"
    elif words:
        # One word is a shell command as typed; several are its argv, quoted one by one.
        job = {"command": words[0] if len(words) == 1 else shlex.join(words)}
        source = "the command argument"
    else:
        job, source = {}, ""
    for field, value in fields.items():
        if field in job:
            fail(f"'{field}' is given twice: in {source} and as {_flag(field)}", EXIT_USAGE)
        job[field] = value
    return job


def _enqueue_many(
    ctx: typer.Context, text: str, defaults: JobDefaults, json_out: bool, quiet: bool
) -> None:
    if not text.strip():
        fail("no jobs in the input", EXIT_USAGE)
    with open_store(ctx) as store:
        result = service.enqueue_text(store, state(ctx).settings, text, defaults)
    if json_out:
        print_json({"created": result.created, "existing": result.existing})
    elif not quiet:
        skipped = f" ({result.existing} skipped: idempotency key already used)"
        noun = "job" if result.created == 1 else "jobs"
        print(f"Enqueued {result.created} {noun}" + (skipped if result.existing else ""))


@guarded
def enqueue(
    ctx: typer.Context,
    words: list[str] | None = typer.Argument(
        None,
        metavar="[JOB_JSON | COMMAND | -- CMD ARGS...]",
        help="The job as one JSON object, or its shell command as one string, or its command "
        "as words after -- (each quoted).",
        show_default=False,
    ),
    command: str | None = typer.Option(
        None, "--command", metavar="CMD", help="The shell command to run."
    ),
    job_id: str | None = typer.Option(
        None, "--id", metavar="ID", help="The job's id (default: a new unique one)."
    ),
    priority: int | None = typer.Option(
        None, "--priority", "-p", metavar="N", help="Higher runs first (default 0)."
    ),
    max_retries: int | None = typer.Option(
        None, "--max-retries", metavar="N", help="Retries after the first attempt fails."
    ),
    timeout: float | None = typer.Option(
        None, "--timeout", metavar="SECONDS", help="Stop an attempt after this many seconds."
    ),
    run_at: str | None = typer.Option(
        None, "--run-at", metavar="TIME", help="Run it no earlier than this (ISO 8601)."
    ),
    queue: str | None = typer.Option(
        None, "--queue", "-q", metavar="NAME", help="Its queue (default: default)."
    ),
    idempotency_key: str | None = typer.Option(
        None,
        "--idempotency-key",
        metavar="KEY",
        help="Add it only if no job holds this key yet.",
    ),
    file: str | None = typer.Option(
        None,
        "--file",
        "-f",
        metavar="PATH",
        help="Read jobs from PATH ('-' for stdin; also read from a pipe without it): JSON "
        "Lines, a JSON array, or JSON objects one after another. All or nothing.",
    ),
    delay_text: str | None = typer.Option(
        None,
        "--delay",
        metavar="DURATION",
        help="Run it this long from now (90s, 10m, 2h, 7d), unless the job gives its own "
        "run_at or delay.",
    ),
    cwd: str | None = typer.Option(
        None,
        "--cwd",
        metavar="DIR",
        help="Run it in this directory (made absolute here), unless the job gives its own.",
    ),
    env_pairs: list[str] = typer.Option(
        [],
        "--env",
        metavar="NAME=VALUE",
        help="Set this in its environment (repeat for more), beside the pool's.",
    ),
    capture_env: bool = typer.Option(
        False,
        "--capture-env",
        help="Give it this shell's whole environment (--env adds to it), as pueue does.",
    ),
    after: list[str] = typer.Option(
        [],
        "--after",
        metavar="ID[,ID...]",
        help="Run it once these jobs have completed (repeat or separate with commas); if "
        "one ends dead or cancelled, it is cancelled too.",
    ),
    after_any_end: bool = typer.Option(
        False,
        "--after-any-end",
        help="With --after: run it once those jobs have ended, however they ended.",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="Print only the job id."),
    as_json: bool = typer.Option(False, "--json", help="Print the job as JSON."),
) -> None:
    """Add a job (or many) to the queue.

    Fields: id, command (required), queue, priority, run_at (ISO 8601) or delay ("10m", or
    seconds), max_retries, timeout (seconds), idempotency_key, cwd, env, after (ids of jobs
    made before it) and after_any_end. A typed job gives type and payload instead of command:
    the type's command (config.json job_types) gets the payload as JSON on stdin.

    Example: queuectl enqueue "echo Hello World"

    Example: queuectl enqueue --command "make report" --priority 5 --max-retries 2

    Example: queuectl enqueue --delay 10m -- rsync -a "my files/" backup:

    Example: queuectl enqueue '{"id":"report","command":"make report"}' --after fetch1,fetch2

    Example: jq -c '.[]' jobs.json | queuectl enqueue
    """
    words = words or []
    after_dash: list[str] | None = ctx.meta.get(_WORDS_KEY)
    given = {
        "command": command,
        "id": job_id,
        "priority": priority,
        "max_retries": max_retries,
        "timeout": timeout,
        "run_at": run_at,
        "queue": queue,
        "idempotency_key": idempotency_key,
    }
    fields = {name: value for name, value in given.items() if value is not None}
    defaults = _job_defaults(delay_text, cwd, env_pairs, capture_env, after, after_any_end)
    if run_at is not None and delay_text is not None:
        fail("give either --run-at or --delay, not both", EXIT_USAGE)
    if words == ["-"] and file is None and after_dash is None:
        file, words = "-", []  # `-` is stdin, as for --file
    if file is not None:
        if words or after_dash is not None or "command" in fields:
            fail("give either one job or --file PATH, not both", EXIT_USAGE)
        if fields:
            flags = ", ".join(_flag(name) for name in fields)
            fail(f"{flags}: for one job; give them in each job of the input", EXIT_USAGE)
        _enqueue_many(ctx, _read_input(file), defaults, as_json, quiet)
        return
    if not (words or after_dash is not None or fields):
        if not _stdin_is_piped():
            fail("give a job: a command, --command CMD, JSON, or --file PATH", EXIT_USAGE)
        _enqueue_many(ctx, _read_input(None), defaults, as_json, quiet)
        return
    settings = state(ctx).settings
    job = _job_object(words, after_dash, fields)
    if not words and "command" not in job:  # the options alone, without the command
        fail("no command: give --command CMD, a command string, or its words after --", EXIT_USAGE)
    try:
        spec = service.parse_job_object(job, settings.job_types)
    except service.InputError as error:
        message = str(error)
        if error.field in fields:  # said as the option it came from
            message = message.replace(f"field '{error.field}'", _flag(error.field))
        fail(message, EXIT_USAGE)
    try:
        spec = defaults.apply(spec)
    except JobSpecError as error:
        fail(f"--{error.field}: {str(error).split(': ', 1)[-1]}", EXIT_USAGE)
    with open_store(ctx) as store:
        outcome = service.enqueue(store, settings, spec)
    job_row = outcome.job
    if as_json:
        print_json(job_row.to_dict() | {"created": outcome.created})
    elif quiet:
        print(job_row.id)
    elif outcome.created and job_row.state is JobState.WAITING:
        print(f"Enqueued job {job_row.id}: waiting for the jobs it runs after")
    elif outcome.created and job_row.state is JobState.CANCELLED:
        print(f"Enqueued job {job_row.id}, cancelled at once: {job_row.last_error}")
    elif outcome.created:
        print(f"Enqueued job {job_row.id}")
    else:
        key = job_row.idempotency_key
        print(f"Job {job_row.id} already holds idempotency key '{key}'; nothing added")


def register(app: typer.Typer) -> None:
    app.command(cls=_DashDashCommand)(enqueue)
