"""An operator's control of jobs: cancel, retry, delete, prune, and the audit trail."""

from __future__ import annotations

import sys

import typer

from .. import control
from ..control import Report
from ..models import JobState
from ..timeutil import parse_duration
from .context import EXIT_FAILURE, EXIT_USAGE, fail, guarded, open_store, print_json, queue_option
from .jobs import parse_state, require_utf8_id
from .output import Output, chosen, output_option

CLI = "cli"

IDS = typer.Argument(None, metavar="ID...", help="The jobs' ids.")
STATE = typer.Option(None, "--state", "-s", metavar="STATE", help="Every job in this state.")
QUEUE = typer.Option(None, "--queue", "-q", metavar="NAME", help="Every job of this queue.")
SEARCH = typer.Option(
    None,
    "--search",
    metavar="SEARCH",
    help="Every job the search matches (as list --query takes it): free text in the id, "
    "command or last error, and state: queue: exit: worker: error: since:.",
)


def _chosen(
    ctx: typer.Context,
    job_ids: list[str] | None,
    state_name: str | None,
    queue: str | None,
    search: str | None,
) -> tuple[list[str], str | None]:
    """The ids named, or those the filter selects (then also the filter, in words)."""
    by_filter = state_name is not None or queue is not None or search is not None
    if bool(job_ids) == by_filter:
        fail("give one or more job ids, or a filter (--state, --queue, --search)", EXIT_USAGE)
    if job_ids:
        for job_id in job_ids:
            require_utf8_id(job_id)
        return list(job_ids), None
    state = parse_state(state_name)
    name = None if queue is None else queue_option(queue)
    with open_store(ctx) as store:
        ids = control.matching_ids(store, state, name, search)
    return ids, control.describe_filter(state, name, search)


def _finish(report: Report, unchanged_words: str, by_filter: str | None) -> None:
    """What was done is on stdout by now; what was refused is one sentence on stderr."""
    problems = [
        f"job '{job_id}' is {state.value}: {report.reasons.get(job_id, unchanged_words)}"
        for job_id, state in report.unchanged
    ]
    problems += [f"no job with id '{job_id}'" for job_id in report.missing]
    if problems:
        sys.stdout.flush()  # in order, where both go to one terminal or file
        fail("; ".join(problems), EXIT_FAILURE)
    if by_filter is not None and not (report.done or report.pending_stop):
        print(f"No job matched the {by_filter}")


@guarded
def cancel(
    ctx: typer.Context,
    job_ids: list[str] | None = IDS,
    state_name: str | None = STATE,
    queue: str | None = QUEUE,
    search: str | None = SEARCH,
) -> None:
    """Cancel jobs: a waiting one ends cancelled at once; a running one is stopped by its pool
    (every process of the run, within a second) and ends cancelled, not retried. A finished
    job is left as it is.

    Example: queuectl cancel job1   (or: queuectl cancel --queue reports --state pending)
    """
    ids, by_filter = _chosen(ctx, job_ids, state_name, queue, search)
    with open_store(ctx) as store:
        report = control.cancel_jobs(store, ids, control.local_operator(CLI), by_filter)
    for job_id in report.done:
        print(f"Job {job_id} cancelled")
    for job_id in report.pending_stop:
        print(f"Job {job_id} is running: its pool stops it now, and it ends cancelled")
    _finish(report, "nothing to cancel", by_filter)


@guarded
def retry(
    ctx: typer.Context,
    job_ids: list[str] | None = IDS,
    state_name: str | None = STATE,
    queue: str | None = QUEUE,
    search: str | None = SEARCH,
) -> None:
    """Retry jobs: a dead or cancelled one goes back to pending with a fresh retry budget; a
    failed one waiting out its backoff is ready now, its attempts kept. History is kept.

    Example: queuectl retry job1
    """
    ids, by_filter = _chosen(ctx, job_ids, state_name, queue, search)
    with open_store(ctx) as store:
        before = store.job_states(ids)
        report = control.retry_jobs(store, ids, control.local_operator(CLI), by_filter)
        after = store.job_states(report.done)
    for job_id in report.done:
        if before.get(job_id) is JobState.FAILED:
            print(f"Job {job_id} is ready to run now")
        elif after.get(job_id) is JobState.WAITING:
            print(f"Job {job_id} moved from {before[job_id].value} to waiting (for its parents)")
        else:
            print(f"Job {job_id} moved from {before[job_id].value} to pending")
    _finish(report, "only dead, cancelled and failed jobs are retried", by_filter)


@guarded
def delete(
    ctx: typer.Context,
    job_ids: list[str] | None = IDS,
    state_name: str | None = STATE,
    queue: str | None = QUEUE,
    search: str | None = SEARCH,
) -> None:
    """Delete jobs with their attempts and output. A running job is refused: cancel it first.

    Example: queuectl delete job1   (or: queuectl delete --state cancelled)
    """
    ids, by_filter = _chosen(ctx, job_ids, state_name, queue, search)
    with open_store(ctx) as store:
        who = control.local_operator(CLI)
        state = None if by_filter is None else parse_state(state_name)
        report = control.delete_jobs(store, ids, who, by_filter, state)
    for job_id in report.done:
        print(f"Job {job_id} deleted")
    _finish(report, "a running job is not deleted; cancel it first", by_filter)


@guarded
def prune(
    ctx: typer.Context,
    state_names: list[str] = typer.Option(
        [],
        "--state",
        "-s",
        metavar="STATE",
        help="Finished jobs in this state: completed, cancelled or dead (repeat for several).",
    ),
    older_than: str = typer.Option(
        ...,
        "--older-than",
        metavar="AGE",
        help="Finished longer ago than this: 90s, 30m, 12h, 7d, 2w.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count them; remove nothing."),
) -> None:
    """Remove finished jobs (with their attempts) that ended longer ago than --older-than,
    in small batches that never hold up running pools.

    Example: queuectl prune --state completed --older-than 7d
    """
    if not state_names:
        fail("give the states to prune with --state (completed, cancelled, dead)", EXIT_USAGE)
    states = [state for state in map(parse_state, state_names) if state is not None]
    control.check_prunable(states)  # before anything is opened
    try:
        age = parse_duration(older_than)
    except ValueError as error:
        fail(f"--older-than: {error}", EXIT_USAGE)
    with open_store(ctx) as store:
        count = control.prune(store, states, age, control.local_operator(CLI), dry_run)
    names = " or ".join(state.value for state in states)
    noun = "job" if count == 1 else "jobs"
    if dry_run:
        print(f"{count:,} {names} {noun} finished more than {older_than} ago would be removed")
    else:
        print(f"Removed {count:,} {names} {noun} finished more than {older_than} ago")


@guarded
def audit(
    ctx: typer.Context,
    limit: int = typer.Option(50, "--limit", "-n", min=1, help="At most this many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array only."),
    output: str | None = output_option(),
) -> None:
    """Operators' actions, newest first: when, from which face, who, what, on what.

    Example: queuectl audit --limit 20
    """
    mode = chosen(output, as_json)
    with open_store(ctx) as store:
        entries = control.audit_trail(store, limit)
    if mode is Output.JSON:
        print_json([entry.to_dict() for entry in entries])
        return
    from . import render

    empty = "No operator actions recorded yet."
    render.show(render.audit_table(entries), mode is Output.PLAIN, empty)


def register(app: typer.Typer) -> None:
    for command in (cancel, retry, delete, prune, audit):
        app.command()(command)
