"""The dead letter queue: list dead jobs and send them back to pending."""

from __future__ import annotations

import typer

from .. import control, service
from ..display import is_utf8
from ..models import JobState

# `render` (and rich with it) is imported by the commands that draw: enqueue and the
# pool start without it.
from .context import EXIT_FAILURE, EXIT_USAGE, fail, guarded, open_store, print_json
from .jobs import row_limit
from .output import Output, chosen, output_option

app = typer.Typer(
    help="The dead letter queue: jobs that used up their retries.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("list")
@guarded
def list_dead(
    ctx: typer.Context,
    limit: int = typer.Option(1000, "--limit", "-n", min=0, help="At most this many (0: all)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array only."),
    output: str | None = output_option(),
) -> None:
    """List dead jobs with their last exit code and error, the latest to die first.

    Example: queuectl dlq list
    """
    mode = chosen(output, as_json)
    with open_store(ctx) as store:
        jobs = service.dead_jobs(store, row_limit(limit))
    if mode is Output.JSON:
        print_json([job.to_dict() for job in jobs])
        return
    from . import render

    render.show(render.dead_table(jobs), mode is Output.PLAIN, "The dead letter queue is empty.")


@app.command("groups")
@guarded
def groups(
    ctx: typer.Context,
    failed: bool = typer.Option(
        False, "--failed", help="Group the failed jobs (waiting to retry) instead of the dead."
    ),
    limit: int = typer.Option(100, "--limit", "-n", min=1, max=10_000, help="At most this many."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array only."),
    output: str | None = output_option(),
) -> None:
    """Dead jobs grouped by how they failed: the exit (or signal, or timeout) and the last
    line printed, with numbers, hex, ids and paths masked. Largest group first.

    Retry or delete a whole group with `dlq retry --group FAILURE` or `dlq delete --group`.

    Example: queuectl dlq groups
    """
    mode = chosen(output, as_json)
    state = JobState.FAILED if failed else JobState.DEAD
    with open_store(ctx) as store:
        found = service.error_groups(store, state, limit)
    if mode is Output.JSON:
        print_json([group.to_dict() for group in found])
        return
    from . import render

    render.show(render.groups_table(found), mode is Output.PLAIN, f"No {state.value} jobs.")


def _group_text(group: str) -> str:
    if not group.strip() or not is_utf8(group):
        fail("--group must be a FAILURE as `dlq groups` shows it", EXIT_USAGE)
    return group


@app.command("delete")
@guarded
def delete_group(
    ctx: typer.Context,
    group: str = typer.Option(..., "--group", metavar="FAILURE", help="An error group's text."),
) -> None:
    """Delete every dead job of one error group, with its attempts and output.

    Example: queuectl dlq delete --group 'exit code 1 · disk quota exceeded on <path>'
    """
    with open_store(ctx) as store:
        report = control.delete_group(store, _group_text(group), control.local_operator("cli"))
    print(f"Deleted {len(report.done)} dead job(s) of the group")


@app.command("retry")
@guarded
def retry(
    ctx: typer.Context,
    job_ids: list[str] | None = typer.Argument(None, metavar="ID...", help="Dead jobs to retry."),
    retry_all: bool = typer.Option(False, "--all", help="Retry every dead job."),
    group: str | None = typer.Option(
        None, "--group", metavar="FAILURE", help="Retry every dead job of this error group."
    ),
) -> None:
    """Return dead jobs to pending with a fresh retry budget (history is kept).

    Every named job that is dead is retried; if any other is named (not dead, or unknown),
    that is reported and the exit code is 1.

    Example: queuectl dlq retry job1
    """
    if group is not None:
        if job_ids or retry_all:
            fail("give job ids, --all or --group, not several", EXIT_USAGE)
        with open_store(ctx) as store:
            who = control.local_operator("cli")
            report = control.retry_group(store, _group_text(group), who)
        print(f"Retried {len(report.done)} dead job(s) of the group")
        return
    if bool(job_ids) == retry_all:
        fail("give one or more job ids, or --all", EXIT_USAGE)
    bad = next((job_id for job_id in job_ids or () if not is_utf8(job_id)), None)
    if bad is not None:
        fail(f"job id {bad!r} is not valid UTF-8 text", EXIT_USAGE)
    with open_store(ctx) as store:
        who = control.local_operator("cli")
        outcome = control.retry_dead(store, None if retry_all else job_ids, who)
    for job_id in outcome.retried:
        print(f"Job {job_id} moved from dead to pending")
    if retry_all and not outcome.retried:
        print("The dead letter queue is empty; nothing to retry.")
    problems = [f"job '{i}' is not in the dead letter queue" for i in outcome.not_dead]
    problems += [f"no job with id '{i}'" for i in outcome.unknown]
    if problems:
        fail("; ".join(problems), EXIT_FAILURE)
