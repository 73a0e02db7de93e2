"""What one settle-and-claim exchange changes in each worker's row, for every backend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..error_groups import fingerprint
from ..lifecycle import FAILED_OUTCOMES, RetryPolicy, Transition, after_attempt
from ..models import Job, JobState, Outcome
from .base import Settlement, SettleResult


@dataclass(slots=True)
class WorkerTouch:
    """How one exchange changes one worker's row."""

    job: Job | None = None  # the job it claimed (busy), or None (idle)
    done: int = 0
    failed: int = 0


# A run that leaves its job in one of these may give a worker work (now or later).
_MAKE_WORK = frozenset({JobState.PENDING, JobState.FAILED})


def made_work_by(settled: Sequence[SettleResult], parents_ended: bool, limited: bool) -> bool:
    """Whether settling these runs may have given some pool's worker work: a job back to
    waiting (a retry, due now or later, or handed back), dependents freed (`parents_ended`),
    or, where a queue has a limit (`limited`), a run ended there: room for one more."""
    if parents_ended or any(result.state in _MAKE_WORK for result in settled):
        return True
    return limited and any(result.state is not None for result in settled)


def tally(
    settlements: Sequence[Settlement], results: Sequence[SettleResult]
) -> dict[str, WorkerTouch]:
    """Each settling worker's completed and failed runs; a fenced-out result counts nothing."""
    touched: dict[str, WorkerTouch] = {}
    for settlement, result in zip(settlements, results, strict=True):
        if result.state is None:
            continue
        touch = touched.setdefault(settlement.job.worker_id or "", WorkerTouch())
        if settlement.outcome is Outcome.COMPLETED:
            touch.done += 1
        elif settlement.outcome in FAILED_OUTCOMES and result.state is not JobState.CANCELLED:
            touch.failed += 1  # a run that failed once cancelled was asked for is neither
    return touched


def error_group(settlement: Settlement, state: JobState) -> str | None:
    """The group a failed run puts its job in (None unless the job is failed or dead now)."""
    if state not in (JobState.FAILED, JobState.DEAD):
        return None
    return fingerprint(settlement.error, settlement.output)


def step_after(
    settlement: Settlement, fenced: tuple[int, int, int, object], policy: RetryPolicy
) -> Transition:
    """Where the job of a run that did not complete goes, by the lifecycle's rule: `fenced` is
    what its row held under the fence (its run_at when claimed, the attempts spent, its
    max_retries, and whether a cancel was asked)."""
    scheduled_at, attempts, max_retries, cancel_requested = fenced
    return after_attempt(
        settlement.outcome,
        attempts=attempts,
        max_retries=max_retries,
        scheduled_at=scheduled_at,
        now=settlement.finished_at,
        policy=policy,
        cancel_requested=bool(cancel_requested),
    )


def lost_run(job: Job, now: int) -> Settlement:
    """The run of a job whose worker died or vanished, as recovery settles it at `now`."""
    return Settlement(
        job=job,
        outcome=Outcome.LOST,
        exit_code=None,
        output="",
        error=f"worker {job.worker_id} (pid {job.worker_pid}) was lost mid-job",
        finished_at=now,
    )
