"""Job commands: list, show, status, stats."""

from __future__ import annotations

import sys

import typer

from .. import service
from ..display import is_utf8
from ..models import STATES, JobState

# `render` (and rich with it) is imported by the commands that draw: enqueue and the
# pool start without it.
from .context import EXIT_USAGE, fail, guarded, open_store, print_json, queue_option
from .output import Output, chosen, output_option


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
    output: str | None = output_option(),
) -> None:
    """List jobs in creation order.

    Example: queuectl list --state pending --queue reports
    Example: queuectl list --query 'state:dead error:"disk quota"'
    """
    mode = chosen(output, as_json)
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
    if mode is Output.JSON:
        print_json([job.to_dict() for job in jobs])
        return
    from . import render

    if query is not None:
        empty = "No jobs match the search."
    else:
        empty = "No jobs" + (f" in state {job_state.value}." if job_state else ".")
    render.show(render.jobs_table(jobs, now), mode is Output.PLAIN, empty)
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
    output: str | None = output_option(),
) -> None:
    """Jobs per state and the number of active workers.

    Example: queuectl status --json
    """
    mode = chosen(output, as_json)
    name = None if queue is None else queue_option(queue)
    with open_store(ctx) as store:
        counts = service.queue_status(store, name)
    if mode is Output.JSON:
        print_json(counts.to_dict())
        return
    from . import render

    render.show(render.counts_table(counts), mode is Output.PLAIN)


@guarded
def stats(
    ctx: typer.Context,
    queue: str | None = typer.Option(
        None, "--queue", "-q", metavar="NAME", help="The figures of this queue only."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    output: str | None = output_option(),
) -> None:
    """Counts, throughput, retries, and queue-wait and run-time latencies.

    Example: queuectl stats --queue reports
    """
    mode = chosen(output, as_json)
    name = None if queue is None else queue_option(queue)
    with open_store(ctx) as store:
        result = service.queue_stats(store, name)
    if mode is Output.JSON:
        print_json(result.to_dict())
        return
    from . import render

    for number, table in enumerate(render.stats_tables(result)):
        if number and mode is Output.PLAIN:
            print()  # a blank line between the blocks
        render.show(table, mode is Output.PLAIN)


def register(app: typer.Typer) -> None:
    app.command("list")(list_jobs)
    app.command()(show)
    app.command()(status)
    app.command()(stats)
