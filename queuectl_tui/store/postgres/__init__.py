"""The PostgreSQL backend: PostgresStore, and its opener for open_store.

Imported only when a location names PostgreSQL, so that psycopg stays out of every command
that uses SQLite."""

from __future__ import annotations

from ..options import StoreOptions
from .store import PostgresStore


def open_postgres(location: str, options: StoreOptions) -> PostgresStore:
    """The queue at the PostgreSQL URL `location`."""
    return PostgresStore(location, lock_wait=options.lock_wait, planned_once=options.planned_once)


__all__ = ["PostgresStore", "open_postgres"]
