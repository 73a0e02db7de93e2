"""The schema: numbered migrations (migrations/NNNN_name.sql), applied up to the latest under
an advisory lock, so that pools starting together on several hosts migrate once.

The queue's tables live in a schema of their own (url.py); `queuectl_migrations` in it records
which migrations it has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from ..base import ForeignDatabaseError, StoreError
from ..sqlfiles import numbered_scripts

MIGRATIONS = numbered_scripts(Path(__file__).with_name("migrations"))
SCHEMA_VERSION = len(MIGRATIONS)

_VERSION = "SELECT coalesce(max(version), 0) FROM queuectl_migrations"


def _version(conn: psycopg.Connection[Any], schema: str) -> int | None:
    """The schema's migration level; None when the schema holds no queue (yet)."""
    found = conn.execute(
        "SELECT to_regclass(format('%%I.queuectl_migrations', %s::text))", (schema,)
    ).fetchone()
    if found is None or found[0] is None:
        return None
    row = conn.execute(_VERSION).fetchone()
    return int(row[0]) if row else 0


def _foreign_tables(conn: psycopg.Connection[Any], schema: str) -> int:
    row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)).fetchone()
    return int(row[0]) if row else 0


def ensure_current(conn: psycopg.Connection[Any], schema: str, shown: str) -> None:
    """Bring the queue in `schema` to the latest migration, creating it if there is none.
    `conn` is not in a transaction; its search_path is the schema."""
    with conn.transaction():
        version = _version(conn, schema)
    if version == SCHEMA_VERSION:
        return
    with conn.transaction():
        # The key names the schema: queues in other schemas migrate independently.
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext('queuectl.migrate.' || %s::text))", (schema,)
        )
        # The schema name was checked against [a-z_][a-z0-9_]* (url.py): safe as it is.
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        version = _version(conn, schema)  # again, under the lock: another pool may have done it
        if version is None:
            if _foreign_tables(conn, schema):
                raise ForeignDatabaseError(
                    f"{shown} (schema {schema})", "the schema holds tables of another application"
                )
            conn.execute(
                "CREATE TABLE queuectl_migrations (version integer PRIMARY KEY, "
                "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            version = 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the queue in {shown} (schema {schema}) was made by a newer queuectl "
                f"(schema version {version}, this one knows {SCHEMA_VERSION}); upgrade queuectl"
            )
        for number, name, script in MIGRATIONS[version:]:
            conn.execute(script.encode())  # no parameters: run as one script
            conn.execute(
                "INSERT INTO queuectl_migrations (version, name) VALUES (%s, %s)", (number, name)
            )
