"""The SQLite backend: SQLiteStore, and its opener for open_store.

WAL journal, busy timeout, and one `BEGIN IMMEDIATE` transaction per state change, so that
claims are atomic across threads and separate OS processes."""

from __future__ import annotations

from ..options import StoreOptions
from .store import SQLiteStore


def open_sqlite(path: str, options: StoreOptions) -> SQLiteStore:
    """The queue in the SQLite file at `path`, with the waits `options` ask for."""
    if options.lock_wait is None:  # SQLiteStore's own: 5 s, then retries for a minute
        return SQLiteStore(path, file_mode=options.file_mode, create_at_open=options.create_at_open)
    # A bounded wait is all in SQLite's busy handler: nothing retries after it.
    return SQLiteStore(
        path,
        busy_timeout=options.lock_wait,
        lock_retry_seconds=0.0,
        file_mode=options.file_mode,
        create_at_open=options.create_at_open,
    )


__all__ = ["SQLiteStore", "open_sqlite"]
