"""The schema: numbered migrations (migrations/NNNN_name.sql), applied up to the latest.

They are read once at import; `PRAGMA user_version` records the last one a database has."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..base import ForeignDatabaseError
from ..sqlfiles import numbered_scripts

# `PRAGMA application_id` of a queuectl database ("qctl"): how a file is known as a queue
# before anything in it is changed. Databases made before it was stamped are known by their
# tables (see dbfile.py) and get the stamp when next opened.
APPLICATION_ID = int.from_bytes(b"qctl", "big")

_FOLDER = Path(__file__).with_name("migrations")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int  # the user_version of a database once it is applied
    name: str  # its file in migrations/
    script: str
    statements: tuple[str, ...]


def _split(script: str) -> tuple[str, ...]:
    """The statements of a script; sqlite3.complete_statement keeps trigger bodies whole.
    A migration runs statement by statement because executescript would first commit the
    transaction that also records its user_version (see upgrade)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return tuple(statements)


def _load() -> tuple[Migration, ...]:
    return tuple(
        Migration(version, name, script, _split(script))
        for version, name, script in numbered_scripts(_FOLDER)
    )


MIGRATIONS = _load()
SCHEMA_VERSION = len(MIGRATIONS)


def is_current(conn: sqlite3.Connection) -> bool:
    """Whether the database has every migration and the stamp (read without the write lock)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    stamp = conn.execute("PRAGMA application_id").fetchone()[0]
    return bool(version == SCHEMA_VERSION and stamp == APPLICATION_ID)


# A migration that edits a table's definition in place (SQLite's procedure for loosening a
# CHECK: writable_schema on, sqlite_schema updated, writable_schema off) ends with this
# statement; the schema version must then move on, or no connection reads the new text.
_SCHEMA_EDITED = re.compile(r"PRAGMA writable_schema\s*=\s*OFF;?", re.IGNORECASE)


def _reload_schema(conn: sqlite3.Connection) -> None:
    version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    conn.execute(f"PRAGMA schema_version = {version + 1}")  # an int: no injection


def upgrade(conn: sqlite3.Connection, location: str) -> None:
    """Apply the migrations the database lacks and stamp it as a queue (an earlier queuectl
    made databases without the stamp), inside the caller's write transaction: every migration
    commits together with its user_version, or nothing does."""
    current = conn.execute("PRAGMA user_version").fetchone()[0]  # re-read under the lock
    if current == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise ForeignDatabaseError(location, "it holds tables of another application")
    for migration in MIGRATIONS[current:]:
        for statement in migration.statements:
            conn.execute(statement)
            if _SCHEMA_EDITED.fullmatch(statement):
                _reload_schema(conn)
        # PRAGMA takes no bound parameters; both numbers are ints of this module.
        conn.execute(f"PRAGMA user_version = {migration.version}")
    if conn.execute("PRAGMA foreign_key_check").fetchone() is not None:
        raise RuntimeError(f"migrating {location} left a reference dangling; nothing changed")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
