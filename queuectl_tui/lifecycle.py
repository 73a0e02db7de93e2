"""What becomes of a job after an attempt: the queue's rules, apart from any database.

A store reads the job's fenced row under its own lock (still processing, still this worker's,
still this run), asks `after_attempt` where the job goes, and writes that. Nothing here does
I/O, so every backend applies the same rules and they are tested on their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from .models import JobState, Outcome

# Outcomes a run can be recorded with (UNKNOWN is only ever read back).
RECORDED_OUTCOMES = frozenset(
    {
        Outcome.COMPLETED,
        Outcome.FAILED,
        Outcome.TIMEOUT,
        Outcome.LOST,
        Outcome.CANCELLED,
        Outcome.INTERRUPTED,
    }
)
# Outcomes that spend an attempt of the retry budget (the others are not the job's fault).
FAILED_OUTCOMES = frozenset({Outcome.FAILED, Outcome.TIMEOUT, Outcome.LOST})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry n waits `backoff_base ** n` seconds, never more than `max_backoff`."""

    backoff_base: float = 2.0
    max_backoff: float = 3600.0

    def delay_ms(self, attempts: int) -> int:
        """The wait before the next try after the `attempts`-th attempt failed."""
        try:
            delay = float(self.backoff_base) ** attempts
        except OverflowError:
            delay = self.max_backoff
        return int(min(delay, self.max_backoff) * 1000)


@dataclass(frozen=True, slots=True)
class Transition:
    """Where the job goes: its state, when it may run next, its attempts in the budget."""

    state: JobState
    run_at: int
    attempts: int


def after_attempt(
    outcome: Outcome,
    *,
    attempts: int,
    max_retries: int,
    scheduled_at: int,
    now: int,
    policy: RetryPolicy,
    cancel_requested: bool = False,
) -> Transition:
    """The job's next state after a run recorded with `outcome`.

    `attempts` counts this run (the claim counted it); `scheduled_at` is the job's run_at when
    it was claimed. A completed job keeps both, even if an operator asked to cancel it
    meanwhile: it is done. A run the operator cancelled ends the job cancelled; so does any
    run that did not complete once a cancel was asked for (`cancel_requested`): it is never
    retried. An interrupted run (the pool stopped before or while it ran) goes back to
    pending as it was, and does not count. A failed or timed-out run is retried after the
    policy's backoff while the budget (`max_retries` retries after the first attempt) lasts,
    and is dead after that. A lost run (its worker died) counts too, but is due again at
    once in its old place in line (its run_at as it was): the job did nothing wrong, and the
    first idle worker takes it before the jobs that were behind it."""
    if outcome not in RECORDED_OUTCOMES:
        raise ValueError(f"a run cannot be recorded as {outcome.value!r}")
    if outcome is Outcome.COMPLETED:
        return Transition(JobState.COMPLETED, scheduled_at, attempts)
    if outcome is Outcome.INTERRUPTED:
        state = JobState.CANCELLED if cancel_requested else JobState.PENDING
        return Transition(state, scheduled_at, attempts - 1)
    if outcome is Outcome.CANCELLED or cancel_requested:
        return Transition(JobState.CANCELLED, scheduled_at, attempts)
    if attempts <= max_retries and outcome is Outcome.LOST:
        return Transition(JobState.FAILED, scheduled_at, attempts)
    if attempts <= max_retries:
        return Transition(JobState.FAILED, now + policy.delay_ms(attempts), attempts)
    return Transition(JobState.DEAD, now, attempts)
