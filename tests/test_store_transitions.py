"""The store contract for an operator's transitions: for every state a job can be in, each
backend's cancel, retry, retry-dead and delete do what `lifecycle.after_operator` says."""

from __future__ import annotations

import pytest
from store_helpers import NOW, POLICY, register, settle

from queuectl_tui.lifecycle import Effect, Operation, OperatorTransition, after_operator
from queuectl_tui.models import STATES, JobState, Outcome
from queuectl_tui.store import ClaimRequest, Store

from helpers import spec

LATER = NOW + 5000


def _in_state(store: Store, state: JobState, name: str) -> str:
    """A job in `state`, alone in a queue of its own (so a claim takes it and nothing else)."""
    job_id, queue = f"{name}-{state.value}", f"q-{name}-{state.value}"
    if state is JobState.WAITING:
        store.enqueue(spec(id=f"{job_id}-parent", queue=f"{queue}-parent"), 3, NOW)
        store.enqueue(spec(id=job_id, queue=queue, after=[f"{job_id}-parent"]), 3, NOW)
        return job_id
    retries = 0 if state is JobState.DEAD else 3
    store.enqueue(spec(id=job_id, queue=queue, max_retries=retries), 3, NOW)
    if state is JobState.CANCELLED:
        store.cancel([job_id], NOW, None)
    if state in (JobState.PENDING, JobState.CANCELLED):
        return job_id
    worker = f"w-{job_id}"
    register(store, worker)
    exchange = store.exchange(ClaimRequest([], [worker], 4242, NOW, POLICY, (queue,)))
    claimed = exchange.claimed[worker]
    if state is JobState.COMPLETED:
        settle(store, claimed)
    elif state in (JobState.FAILED, JobState.DEAD):
        settle(store, claimed, Outcome.FAILED, exit_code=1, error="exit 1")
    return job_id


def _effect_seen(store: Store, operation: Operation, job_id: str) -> Effect:
    """Apply `operation` to the job; the effect the store reported."""
    if operation is Operation.CANCEL:
        cancelled = store.cancel([job_id], LATER, None)
        if cancelled.cancelled:
            return Effect.MOVED
        return Effect.REQUESTED if cancelled.requested else Effect.REFUSED
    if operation is Operation.RETRY:
        retried = store.retry([job_id], LATER, None)
        if retried.fresh:
            return Effect.MOVED
        return Effect.RUN_NOW if retried.ready else Effect.REFUSED
    if operation is Operation.RETRY_DEAD:
        return Effect.MOVED if store.retry_dead([job_id], LATER) else Effect.REFUSED
    return Effect.DELETED if store.delete([job_id], LATER, None) else Effect.REFUSED


def _holds(store: Store, job_id: str, before: JobState, expected: OperatorTransition) -> None:
    job = store.get(job_id)
    if expected.state is None:
        assert job is None
        return
    assert job is not None and job.state is expected.state
    if expected.fresh_budget:
        assert job.attempts == 0 and job.run_at == LATER
    elif expected.effect is Effect.RUN_NOW:
        assert job.attempts == 1 and job.run_at == LATER
    if expected.effect is Effect.REQUESTED:
        assert store.cancel_requested([job_id]) == [job_id]
    if expected.effect is Effect.REFUSED:
        assert job.state is before


@pytest.mark.parametrize("state", STATES, ids=lambda state: state.value)
@pytest.mark.parametrize("operation", list(Operation), ids=lambda op: op.name.lower())
def test_every_state_goes_where_the_lifecycle_says(
    store: Store, operation: Operation, state: JobState
) -> None:
    expected = after_operator(state, operation)
    job_id = _in_state(store, state, "job")
    assert store.get(job_id).state is state
    assert _effect_seen(store, operation, job_id) is expected.effect
    _holds(store, job_id, state, expected)


def test_the_lifecycle_refuses_what_no_face_may_do() -> None:
    # The rules a reader checks first: a running job is never deleted, a completed one never
    # retried or cancelled, and a pending one never retried.
    assert after_operator(JobState.PROCESSING, Operation.DELETE).effect is Effect.REFUSED
    for operation in (Operation.CANCEL, Operation.RETRY, Operation.RETRY_DEAD):
        assert after_operator(JobState.COMPLETED, operation).effect is Effect.REFUSED
    assert after_operator(JobState.PENDING, Operation.RETRY).effect is Effect.REFUSED
    assert after_operator(JobState.CANCELLED, Operation.RETRY_DEAD).effect is Effect.REFUSED
