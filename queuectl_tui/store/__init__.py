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


def open_store(path: str | Path) -> Store:
    """Open (creating and migrating if needed) the store at `path`."""
    return SQLiteStore(path)


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
