"""Storage: the only package that speaks SQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigurationError
from ..location import normalise, scheme
from .base import (
    Admission,
    BulkEnqueueResult,
    ChangeFeed,
    ClaimRequest,
    DuplicateJobError,
    DuplicateScheduleError,
    EnqueueResult,
    Exchange,
    ForeignDatabaseError,
    Histogram,
    MetricsSnapshot,
    OutputAppend,
    QueueStats,
    ScheduleSync,
    Settlement,
    SettleResult,
    Store,
    StoreBusyError,
    StoreCorrupt,
    StoreError,
    StoreWaitingError,
    SubmitResult,
    Submitted,
)
from .dependencies import UnknownParent
from .options import StoreOptions
from .sqlite import SQLiteStore


def _open_sqlite(location: str, options: StoreOptions) -> Store:
    from .sqlite import open_sqlite

    return open_sqlite(location, options)


def _open_postgres(location: str, options: StoreOptions) -> Store:
    try:
        from .postgres import open_postgres
    except ImportError as error:  # psycopg missing: a plain sentence, not a traceback
        raise ConfigurationError(
            f"PostgreSQL needs psycopg, which is not installed ({error}); "
            "install it with: pip install 'psycopg[binary]' psycopg_pool"
        ) from None
    return open_postgres(location, options)


# The backends by URL scheme; a path is SQLite. Each opener imports its backend when a location
# first names it, so that a backend's driver is loaded only for the queues that use it.
_OPENERS: dict[str, Callable[[str, StoreOptions], Store]] = {
    "sqlite": _open_sqlite,
    "postgresql": _open_postgres,
}


def open_store(location: str | Path, options: StoreOptions = StoreOptions()) -> Store:
    """Open (creating and migrating if needed, see StoreOptions) the store at `location`: a
    path or a URL (see location.py).

    A file that is not a queue is refused untouched (ForeignDatabaseError); a damaged one
    raises StoreCorrupt."""
    where = normalise(str(location))
    backend = scheme(where) or "sqlite"  # a sqlite:// URL is a path by now
    opener = _OPENERS.get(backend)
    if opener is None:
        raise ConfigurationError(
            f"this queuectl stores queues in SQLite only; {backend} is not available"
        )
    return opener(where, options)


__all__ = [
    "Admission",
    "BulkEnqueueResult",
    "ChangeFeed",
    "ClaimRequest",
    "DuplicateJobError",
    "DuplicateScheduleError",
    "EnqueueResult",
    "Exchange",
    "ForeignDatabaseError",
    "Histogram",
    "MetricsSnapshot",
    "OutputAppend",
    "QueueStats",
    "SQLiteStore",
    "ScheduleSync",
    "SettleResult",
    "Settlement",
    "Store",
    "StoreBusyError",
    "StoreCorrupt",
    "StoreError",
    "StoreOptions",
    "StoreWaitingError",
    "SubmitResult",
    "Submitted",
    "UnknownParent",
    "open_store",
]
