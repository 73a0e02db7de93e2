"""How a store is opened, in words every backend understands."""

from __future__ import annotations

from dataclasses import dataclass

from ..files import DEFAULT_FILE_MODE


@dataclass(frozen=True, slots=True)
class StoreOptions:
    lock_wait: float | None = None
    """Seconds a write waits for other writers before it gives up with StoreBusyError, for a
    caller with other work to do meanwhile. None: the backend's own patient wait (SQLite:
    5 s in its busy handler, then retries with backoff for up to a minute)."""

    file_mode: int = DEFAULT_FILE_MODE
    """Permission bits of every file the store creates (SQLite: the database, its -wal, -shm
    and lock files), whatever the umask; files that exist keep theirs."""

    planned_once: bool = False
    """Plan each statement once for any parameters and keep the plan, rather than plan it
    again at each call: for a caller that runs a few statements shaped for it (their plans
    do not depend on the parameters) many times a second, the engine's dispatcher. A server's
    store only (PostgreSQL: a connection pool of its own, with plan_cache_mode
    force_generic_plan); SQLite keeps a prepared statement per statement anyway."""

    create_at_open: bool = True
    """Create a missing queue when the store opens. False: the first write creates it, and
    reads until then see an empty queue, so that reading never creates a database."""
