"""Storage: the only package that speaks SQL."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigurationError
from ..files import DEFAULT_FILE_MODE
from ..location import normalise, scheme
from .base import (
    BulkEnqueueResult,
    ChangeFeed,
    DuplicateJobError,
    EnqueueResult,
    Exchange,
    ForeignDatabaseError,
    QueueStats,
    Settlement,
    SettleResult,
    Store,
    StoreBusyError,
    StoreCorrupt,
    StoreError,
    StoreWaitingError,
)
from .sqlite import SQLiteStore


def open_store(
    path: str | Path,  # a path or a URL (see location.py)
    lock_wait: float | None = None,
    file_mode: int = DEFAULT_FILE_MODE,
    create_at_open: bool = True,
) -> Store:
    """Open (creating with `file_mode` and migrating if needed) the store at `path`.

    A file that is not a queue is refused untouched (ForeignDatabaseError); a damaged one
    raises StoreCorrupt. With `create_at_open` false, a missing database is created by the
    first write, and reads until then see an empty queue.

    A write waits for the database's write lock up to 5 s, then retries with backoff for up
    to a minute. With `lock_wait`, it gives up after that many seconds instead (StoreBusyError),
    for a caller that has other work to do meanwhile."""
    location = normalise(str(path))
    if scheme(location) is not None:  # a backend other than SQLite
        raise ConfigurationError(
            f"this queuectl stores queues in SQLite only; {scheme(location)} is not available"
        )
    if lock_wait is None:
        return SQLiteStore(location, file_mode=file_mode, create_at_open=create_at_open)
    return SQLiteStore(
        location,
        busy_timeout=lock_wait,
        lock_retry_seconds=0.0,
        file_mode=file_mode,
        create_at_open=create_at_open,
    )


__all__ = [
    "BulkEnqueueResult",
    "ChangeFeed",
    "DuplicateJobError",
    "EnqueueResult",
    "Exchange",
    "ForeignDatabaseError",
    "QueueStats",
    "SQLiteStore",
    "SettleResult",
    "Settlement",
    "Store",
    "StoreBusyError",
    "StoreCorrupt",
    "StoreError",
    "StoreWaitingError",
    "open_store",
]
