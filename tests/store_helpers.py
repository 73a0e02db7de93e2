"""Steps the store tests share: claim as a worker, settle a run, register workers; and a
connection of a test's own to a SQLite queue's file."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from queuectl_tui.lifecycle import RetryPolicy
from queuectl_tui.models import Outcome, Worker, WorkerStatus
from queuectl_tui.store import ClaimRequest, Settlement, Store

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
    exchange = store.exchange(ClaimRequest([settlement], [job.worker_id], 1, now, POLICY))
    return exchange.settled[0], exchange.claimed.get(job.worker_id)


def register(store: Store, *ids: str, status=WorkerStatus.IDLE, now: int = NOW) -> None:
    store.register_workers(
        [Worker(i, "pool", 4242, "host", status, now, now, None, None, 0, 0) for i in ids]
    )


@contextlib.contextmanager
def sqlite_file(path: str | Path, writable: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection of the test's own to the SQLite queue at `path`, beside the store's: for
    what only SQLite can answer, and for SQL written by hand around the store. Read-only
    unless `writable`; a writable one commits each statement and has foreign keys on, like
    the store's own connection (deleting a job deletes its attempts)."""
    if writable:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA foreign_keys = ON")
    else:
        conn = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


def sqlite_steps(conn: sqlite3.Connection, read: Callable[[], object]) -> int:
    """How many SQLite virtual machine steps (in units of 100) `read` takes on `conn`: the
    work done, whatever the machine's speed."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(count, 100)
    try:
        read()
    finally:
        conn.set_progress_handler(None, 100)
    return steps
