"""Job commands: enqueue, list, show, status, stats."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from .. import service
from ..display import is_utf8
from ..models import ENV_NAME, STATES, JobDefaults, JobSpecError, JobState

# `render` (and rich with it) is imported by the commands that draw: enqueue and the
# pool start without it.
from .context import EXIT_USAGE, fail, guarded, open_store, print_json, queue_option, state


def _read_lines(path: str) -> list[str]:
    """The lines of a JSON Lines input, decoded strictly as UTF-8.

    Split at newlines only: JSON allows U+2028 or U+0085 raw inside a string, and
    str.splitlines would cut the line there."""
    source = "stdin" if path == "-" else path
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except FileNotFoundError:
        fail(f"file not found: {path}", EXIT_USAGE)
    except OSError as error:
        fail(f"cannot read {source}: {error}", EXIT_USAGE)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        fail(f"{source} is not valid UTF-8 text (byte {error.start + 1})", EXIT_USAGE)
    return [line.removesuffix("\r") for line in text.split("\n")]


def require_utf8_id(job_id: str) -> None:
    if not is_utf8(job_id):
        fail(f"job id {job_id!r} is not valid UTF-8 text", EXIT_USAGE)


# --limit 0 means every row, and so does any number beyond what SQLite can compare.
ALL_ROWS = 2**62


def row_limit(limit: int) -> int:
    return ALL_ROWS if limit == 0 else min(limit, ALL_ROWS)


def parse_state(value: str | None) -> JobState | None:
    if value is None:
        return None
    try:
        return JobState(value.lower())
    except ValueError:
        fail(
            f"unknown state '{value}'; choose one of: {', '.join(s.value for s in STATES)}",
            EXIT_USAGE,
        )


_FLAG = {
    "delay": "--delay",
    "cwd": "--cwd",
    "env": "--env",
    "after": "--after",
    "after_any_end": "--after-any-end",
}


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
        flag = _FLAG.get(error.field or "", "--env")
        fail(str(error).replace(f"field '{error.field}'", flag), EXIT_USAGE)


@guarded
def enqueue(
    ctx: typer.Context,
    job_json: str | None = typer.Argument(
        None, metavar="JOB_JSON", help="The job as one JSON object."
    ),
    file: str | None = typer.Option(
        None,
        "--file",
        "-f",
        metavar="PATH",
        help="Read jobs as JSON Lines from PATH ('-' for stdin); all or nothing.",
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

    Example: queuectl enqueue '{"id":"job1","command":"echo Hello"}' --delay 10m
    Example: queuectl enqueue '{"id":"report","command":"make report"}' --after fetch1,fetch2
    """
    if (job_json is None) == (file is None):
        fail("give either a JOB_JSON argument or --file PATH", EXIT_USAGE)
    defaults = _job_defaults(delay_text, cwd, env_pairs, capture_env, after, after_any_end)
    settings = state(ctx).settings
    if file is not None:
        lines = _read_lines(file)
        if not any(line.strip() for line in lines):
            fail("no jobs in the input", EXIT_USAGE)
        with open_store(ctx) as store:
            result = service.enqueue_lines(store, settings, lines, defaults)
        if as_json:
            print_json({"created": result.created, "existing": result.existing})
        elif not quiet:
            skipped = f" ({result.existing} skipped: idempotency key already used)"
            noun = "job" if result.created == 1 else "jobs"
            print(f"Enqueued {result.created} {noun}" + (skipped if result.existing else ""))
        return
    assert job_json is not None
    spec = service.parse_job_json(job_json, settings.job_types)
    try:
        spec = defaults.apply(spec)
    except JobSpecError as error:
        fail(f"--{error.field}: {str(error).split(': ', 1)[-1]}", EXIT_USAGE)
    with open_store(ctx) as store:
        outcome = service.enqueue(store, settings, spec)
    job = outcome.job
    if as_json:
        print_json(job.to_dict() | {"created": outcome.created})
    elif quiet:
        print(job.id)
    elif outcome.created and job.state is JobState.WAITING:
        print(f"Enqueued job {job.id}: waiting for the jobs it runs after")
    elif outcome.created and job.state is JobState.CANCELLED:
        print(f"Enqueued job {job.id}, cancelled at once: {job.last_error}")
    elif outcome.created:
        print(f"Enqueued job {job.id}")
    else:
        print(f"Job {job.id} already holds idempotency key '{job.idempotency_key}'; nothing added")


@guarded
def list_jobs(
    ctx: typer.Context,
    state_name: str | None = typer.Option(
        None,
        "--state",
        "-s",
        metavar="STATE",
        help="Only jobs in this state: pending, waiting, processing, completed, failed, dead "
        "or cancelled.",
    ),
    queue: str | None = typer.Option(
        None, "--queue", "-q", metavar="NAME", help="Only jobs of this queue."
    ),
    limit: int = typer.Option(1000, "--limit", "-n", min=0, help="At most this many (0: all)."),
    newest: bool = typer.Option(False, "--newest", help="Newest first."),
    query: str | None = typer.Option(
        None,
        "--query",
        "-Q",
        metavar="SEARCH",
        help=(
            "Only jobs the search matches: state:dead queue:emails exit:137 worker:vm-2 "
            'error:"disk quota" since:10m, and free text (id, command, last error).'
        ),
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array only."),
) -> None:
    """List jobs in creation order.

    Example: queuectl list --state pending --queue reports
    Example: queuectl list --query 'state:dead error:"disk quota"'
    """
    job_state = parse_state(state_name)
    name = None if queue is None else queue_option(queue)
    with open_store(ctx) as store:
        if query is not None:
            found = service.search_jobs(
                store, query, row_limit(limit), newest_first=newest, state=job_state, queue=name
            )
            page = service.JobPage(found.jobs, found.matches)
        else:
            page = service.list_jobs(
                store, job_state, limit=row_limit(limit), newest_first=newest, queue=name
            )
        now = store.now()
    jobs, total = page.jobs, page.total
    if as_json:
        print_json([job.to_dict() for job in jobs])
        return
    from . import render

    out = render.console()
    if not jobs:
        if query is not None:
            out.print("No jobs match the search.")
            return
        out.print("No jobs" + (f" in state {job_state.value}." if job_state else "."))
        return
    out.print(render.jobs_table(jobs, now))
    if query is not None:
        verb = "matches" if total == 1 else "match"
        sys.stderr.write(f"{total:,} job{'s' * (total != 1)} {verb} the search.\n")
    if len(jobs) < total:
        sys.stderr.write(f"Showing {len(jobs)} of {total} jobs; use --limit to see more.\n")


@guarded
def show(
    ctx: typer.Context,
    job_id: str = typer.Argument(..., metavar="ID", help="The job's id."),
    as_json: bool = typer.Option(False, "--json", help="Print the job and its attempts as JSON."),
) -> None:
    """Show one job: every field, the attempt history and the latest output.

    Example: queuectl show job1
    """
    require_utf8_id(job_id)
    with open_store(ctx) as store:
        job, attempts = service.job_history(store, job_id)
        links = service.job_links(store, job_id)
    if as_json:
        history = {"attempt_history": [a.to_dict() for a in attempts]}
        print_json(job.to_dict() | service.links_view(links) | history)
        return
    from . import render

    render.job_detail(job, attempts, render.console(), links)


@guarded
def status(
    ctx: typer.Context,
    queue: str | None = typer.Option(
        None, "--queue", "-q", metavar="NAME", help="Count the jobs of this queue only."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Jobs per state and the number of active workers.

    Example: queuectl status --json
    """
    name = None if queue is None else queue_option(queue)
    with open_store(ctx) as store:
        counts = service.queue_status(store, name)
    if as_json:
        print_json(counts.to_dict())
        return
    from . import render

    render.console().print(render.counts_table(counts))


@guarded
def stats(
    ctx: typer.Context,
    queue: str | None = typer.Option(
        None, "--queue", "-q", metavar="NAME", help="The figures of this queue only."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Counts, throughput, retries, and queue-wait and run-time latencies.

    Example: queuectl stats --queue reports
    """
    name = None if queue is None else queue_option(queue)
    with open_store(ctx) as store:
        result = service.queue_stats(store, name)
    if as_json:
        print_json(result.to_dict())
        return
    from . import render

    out = render.console()
    for table in render.stats_tables(result):
        out.print(table)


def register(app: typer.Typer) -> None:
    app.command()(enqueue)
    app.command("list")(list_jobs)
    app.command()(show)
    app.command()(status)
    app.command()(stats)
