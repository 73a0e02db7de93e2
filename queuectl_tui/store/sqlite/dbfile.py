"""What a database path holds, found out before SQLite may change anything in it: nothing, an
empty file, a queue, or another application's file (which must stay byte for byte as it is);
and how a new database file is made."""

from __future__ import annotations

import enum
import os
import sqlite3
import stat
import time
from pathlib import Path
from urllib.parse import quote

from ...files import create_exclusive
from ..base import ForeignDatabaseError, StoreCorrupt, StoreError
from .schema import APPLICATION_ID, SCHEMA_VERSION

# A file modified less than YOUNG_FILE_S ago that looks foreign is looked at again for up to
# YOUNG_FILE_RECHECK_S (it may be a queue being made by another process).
YOUNG_FILE_S = 10.0
YOUNG_FILE_RECHECK_S = 2.0
# The tables of every queue: how one made before the application_id stamp is known.
TABLES = frozenset({"jobs", "attempts", "workers", "stop_requests", "state_counts"})


class FileKind(enum.Enum):
    ABSENT = "absent"
    EMPTY = "empty"  # a zero-byte file, or an SQLite database without any table
    QUEUE = "queue"


def recognise(location: str) -> FileKind:
    """ABSENT, EMPTY or QUEUE; any other file raises (ForeignDatabaseError, StoreCorrupt,
    StoreError for a newer schema or an unreadable file), having changed nothing."""
    try:
        info = os.stat(location)
    except FileNotFoundError:
        return FileKind.ABSENT
    except OSError as error:
        raise StoreError(f"cannot open database {location}: {error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"the database path {location} is not a file")
    if info.st_size == 0:
        return FileKind.EMPTY
    # Read without locks (immutable), a queue that another process is creating this moment
    # can show its tables before its stamp: a file changed in the last seconds is looked at
    # again for a while before it is called another application's.
    give_up_at = time.monotonic() + YOUNG_FILE_RECHECK_S
    while True:
        try:
            return _judge(location, *_read_identity(location))
        except ForeignDatabaseError:
            young = time.time() - os.stat(location).st_mtime < YOUNG_FILE_S
            if not young or time.monotonic() >= give_up_at:
                raise
            time.sleep(0.05)


def _judge(location: str, application_id: int, version: int, names: set[str]) -> FileKind:
    if application_id == APPLICATION_ID:
        return _checked_version(location, version)
    if application_id != 0:
        raise ForeignDatabaseError(location, f"its application_id is {application_id}")
    # Unstamped: an empty database, one made by an earlier queuectl, or someone else's.
    if not names and version == 0:
        return FileKind.EMPTY
    if names >= TABLES and version >= 1:
        return _checked_version(location, version)
    raise ForeignDatabaseError(location, "it holds tables of another application")


def check_folder(location: str) -> None:
    parent = Path(location).expanduser().parent
    if not parent.is_dir():
        raise StoreError(f"the folder for the database does not exist: {parent}")


def create_file(location: str, file_mode: int) -> None:
    """Create the database file first, so that it (and the -wal and -shm files SQLite
    gives the same mode) has the queue's permissions whatever the umask."""
    try:
        created = create_exclusive(location, file_mode)
    except OSError as error:
        raise StoreError(f"cannot create database {location}: {error.strerror}") from None
    # Not created: another process made it meanwhile (look again), or a symlink to nowhere
    # is in the way, which SQLite would follow to create a file elsewhere.
    if not created and recognise(location) is FileKind.ABSENT:
        raise StoreError(f"cannot create database {location}: it is a symbolic link to nothing")


def newer_schema_error(location: str, version: int) -> StoreError:
    return StoreError(
        f"database {location} has schema version {version}; this queuectl understands up "
        f"to {SCHEMA_VERSION}: upgrade queuectl"
    )


def _checked_version(location: str, version: int) -> FileKind:
    if version > SCHEMA_VERSION:
        raise newer_schema_error(location, version)
    return FileKind.QUEUE


def _read_identity(location: str) -> tuple[int, int, set[str]]:
    """application_id, user_version and the names in the schema, read in one read
    transaction without writing: the file is opened read-only, and immutable when no -wal
    file exists (then the main file is the whole database), so that not even a -shm file is
    created.

    Only through SQLite: a plain open() and close() of the file would drop the POSIX locks
    that this process's other connections hold on it, and another process could then delete
    the -wal file under them."""
    # An empty authority (file://), so that no path can be read as a host; bytes, so that a
    # name that is not UTF-8 is quoted as it is on disk.
    uri = "file://" + quote(os.fsencode(os.path.abspath(location))) + "?mode=ro"
    if not os.path.exists(location + "-wal"):
        uri += "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=5.0, isolation_level=None)
        try:
            conn.execute("BEGIN")  # the three reads see one state of the file
            application_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
            conn.execute("COMMIT")
        finally:
            conn.close()
    except sqlite3.Error as error:
        raise store_error(location, error) from None
    return application_id, version, names


# SQLite's primary result codes for a damaged file and for a file that is not a database.
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26


def store_error(location: str, error: sqlite3.Error) -> StoreError | StoreCorrupt:
    """The one place where SQLite's errors become the store's: a damaged file is StoreCorrupt
    (nothing retries it), anything else (a lock that outlasted the busy timeout, a full disk)
    a StoreError."""
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        damaged = code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    else:
        damaged = type(error) is sqlite3.DatabaseError  # what both codes become in Python
    if damaged:
        return StoreCorrupt(location, str(error))
    return StoreError(f"database error: {error}")
