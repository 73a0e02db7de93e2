"""Removing a queue entirely, wherever it lives: for throw-away queues (the benchmarks')."""

from __future__ import annotations

import contextlib
import os

from ..location import normalise, scheme
from .sqlite.writelock import LOCK_SUFFIX

# The files SQLite and the store keep beside a database file.
_SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal", LOCK_SUFFIX)


def discard_queue(location: str) -> None:
    """Delete the queue at `location` and everything in it: a SQLite file with the files
    beside it, or a PostgreSQL queue's schema. A queue that is not there is no error."""
    where = normalise(location)
    if scheme(where) == "postgresql":
        _drop_schema(where)
        return
    for suffix in _SQLITE_SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            os.remove(where + suffix)


def _drop_schema(location: str) -> None:
    import psycopg  # only here: SQLite users need not have it

    from .postgres.database import CONNECT_TIMEOUT, store_errors
    from .postgres.url import parse

    target = parse(location)  # checks the schema name: safe to put in the statement
    with (
        store_errors(target.shown),
        psycopg.connect(target.conninfo, connect_timeout=CONNECT_TIMEOUT, autocommit=True) as conn,
    ):
        conn.execute(f"DROP SCHEMA IF EXISTS {target.schema} CASCADE")
