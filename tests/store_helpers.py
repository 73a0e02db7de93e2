"""Steps the store tests share: claim as a worker, settle a run, register workers."""

from __future__ import annotations

from queuectl_tui.lifecycle import RetryPolicy
from queuectl_tui.models import Outcome, Worker, WorkerStatus
from queuectl_tui.store import Settlement, Store

NOW = 1_800_000_000_000
POLICY = RetryPolicy(2.0, 3600.0)


def claim(store: Store, worker: str = "w1", now: int = NOW):
    """Claim as `worker`, registering it first if it is not an active worker yet."""
    if worker not in {w.id for w in store.list_workers(active_only=True)}:
        register(store, worker, now=now)
    return store.claim(worker, 4242, now)


def settle(store, job, outcome=Outcome.COMPLETED, now=NOW + 1000, exit_code=0, **kw):
    return store.settle(
        Settlement(job, outcome, exit_code, kw.get("output", "out"), kw.get("error"), now),
        POLICY,
    )


def settle_and_claim(store, job, now=NOW + 1000):
    """Record a completed run and claim the same worker's next job, in one exchange."""
    settlement = Settlement(job, Outcome.COMPLETED, 0, "out", None, now)
    exchange = store.exchange([settlement], [job.worker_id], 1, now, POLICY)
    return exchange.settled[0], exchange.claimed.get(job.worker_id)


def register(store: Store, *ids: str, status=WorkerStatus.IDLE, now: int = NOW) -> None:
    store.register_workers(
        [Worker(i, "pool", 4242, "host", status, now, now, None, None, 0, 0) for i in ids]
    )
