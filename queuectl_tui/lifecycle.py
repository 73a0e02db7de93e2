"""What becomes of a job after an attempt: the queue's rules, apart from any database.

A store reads the job's fenced row under its own lock (still processing, still this worker's,
still this run), asks `after_attempt` where the job goes, and writes that. Nothing here does
I/O, so every backend applies the same rules and they are tested on their own.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from .models import FINISHED_STATES, JobState, Outcome

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


class Operation(enum.Enum):
    """What an operator does to chosen jobs, from any face."""

    CANCEL = "cancel"
    RETRY = "retry"
    RETRY_DEAD = "retry dead"  # the dead-letter queue's retry: dead jobs only
    DELETE = "delete"


class Effect(enum.Enum):
    MOVED = "moved"  # the job goes to the transition's state
    REQUESTED = "requested"  # a running job: its pool stops the run, which ends the job cancelled
    RUN_NOW = "run now"  # a failed job waiting out its backoff is due at once, its attempts kept
    DELETED = "deleted"  # the job, its attempts and their output are gone
    REFUSED = "refused"  # nothing changes


@dataclass(frozen=True, slots=True)
class OperatorTransition:
    effect: Effect
    state: JobState | None  # the job's state after it; None once deleted
    fresh_budget: bool = False  # attempts start again from 0


# A job not yet running (or running no more, for now) is cancelled at once.
CANCELLED_AT_ONCE = frozenset({JobState.PENDING, JobState.FAILED, JobState.WAITING})
# A retry takes an ended job that did not complete back to pending.
RETRIED_FRESH = frozenset({JobState.DEAD, JobState.CANCELLED})


def after_operator(state: JobState, operation: Operation) -> OperatorTransition:
    """What `operation` does to a job in `state`. Every backend's statements for cancel,
    retry, retry-dead and delete select the jobs this allows and write what it says; the
    contract suite holds each backend to it, state by state.

    A retried job that runs after others is then placed by `after_parents`: waiting, pending,
    or refused while a parent it needs has not completed."""
    refused = OperatorTransition(Effect.REFUSED, state)
    if operation is Operation.CANCEL:
        if state in CANCELLED_AT_ONCE:
            return OperatorTransition(Effect.MOVED, JobState.CANCELLED)
        if state is JobState.PROCESSING:
            return OperatorTransition(Effect.REQUESTED, state)
        return refused
    if operation is Operation.RETRY or operation is Operation.RETRY_DEAD:
        retried = RETRIED_FRESH if operation is Operation.RETRY else {JobState.DEAD}
        if state in retried:
            return OperatorTransition(Effect.MOVED, JobState.PENDING, fresh_budget=True)
        if state is JobState.FAILED and operation is Operation.RETRY:
            return OperatorTransition(Effect.RUN_NOW, state)
        return refused
    if state is JobState.PROCESSING:  # a running job is never deleted: cancel it first
        return refused
    return OperatorTransition(Effect.DELETED, None)


# How a parent ended, as its children's links record it: a finished state, or DELETED.
DELETED = "deleted"
PARENT_ENDS = frozenset({*(state.value for state in FINISHED_STATES), DELETED})


@dataclass(frozen=True, slots=True)
class Readiness:
    """Where a job that runs after others stands: WAITING for them, PENDING (free to run),
    or CANCELLED because `blocked_by` ended without completing (`reason` says so)."""

    state: JobState
    blocked_by: str | None = None
    reason: str | None = None


def after_parents(parents: Sequence[tuple[str, str | None]], any_end: bool) -> Readiness:
    """A job's state from how each job it runs after has ended, as (id, end) in the order
    they were given (end None: not yet; else a PARENT_ENDS value).

    It runs once every parent has completed. A parent that ended dead or cancelled, or was
    deleted, cancels it (the first such, in the order given, is named), unless it runs after
    any end (`any_end`): then it runs once every parent has ended, however it ended. This is
    the whole rule: enqueue, a parent's end, a parent's retry and an operator's retry all
    apply it, on every backend."""
    blocked = None if any_end else _first_failed(parents)
    if blocked is not None:
        return _cancelled(*blocked)
    if any(end is None for _, end in parents):
        return Readiness(JobState.WAITING)
    return Readiness(JobState.PENDING)


def _first_failed(parents: Sequence[tuple[str, str | None]]) -> tuple[str, str] | None:
    for parent_id, end in parents:
        if end is not None and end != JobState.COMPLETED.value:
            return parent_id, end
    return None


def _cancelled(parent_id: str, end: str) -> Readiness:
    how = "was deleted" if end == DELETED else f"ended {end}"
    reason = f"job '{parent_id}' it runs after {how}"
    return Readiness(JobState.CANCELLED, parent_id, reason)
