"""Storage: the only package that speaks SQL."""

from __future__ import annotations

from pathlib import Path

from .base import (
    BulkEnqueueResult,
    DuplicateJobError,
    EnqueueResult,
    Exchange,
    QueueStats,
    Settlement,
    SettleResult,
    Store,
    StoreBusyError,
    StoreError,
)
from .sqlite import SQLiteStore, failure_transition


def open_store(path: str | Path, lock_wait: float | None = None) -> Store:
    """Open (creating and migrating if needed) the store at `path`.

    A write waits for the database's write lock up to 5 s, then retries with backoff for up
    to a minute. With `lock_wait`, it gives up after that many seconds instead (StoreBusyError),
    for a caller that has other work to do meanwhile."""
    if lock_wait is None:
        return SQLiteStore(path)
    return SQLiteStore(path, busy_timeout=lock_wait, lock_retry_seconds=0.0)


__all__ = [
    "BulkEnqueueResult",
    "DuplicateJobError",
    "EnqueueResult",
    "Exchange",
    "QueueStats",
    "SQLiteStore",
    "SettleResult",
    "Settlement",
    "Store",
    "StoreBusyError",
    "StoreError",
    "failure_transition",
    "open_store",
]
