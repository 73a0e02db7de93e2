"""One store's SQLite connection: opening and configuring it, reads, and the write path.

The write path: the write turn, `BEGIN IMMEDIATE` with retries, the sync of a durable commit."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ..base import StoreBusyError, StoreError, StoreWaitingError
from ..rows import D, Params, RowMap
from . import schema
from .dbfile import FileKind, check_folder, create_file, newer_schema_error, recognise, store_error
from .wal import WalFile
from .writelock import WriteTurn, process_lock

log = logging.getLogger("queuectl.store")

T = TypeVar("T")


class Database:
    """The connection of one store to the queue at `location` (a path, or ":memory:").

    With `create` false a missing file is created only by the first write; until then the
    connection is to an empty in-memory queue, a stand-in, so that reading never creates a
    database. The stand-in gives way to the file once there is one."""

    def __init__(
        self,
        location: str,
        busy_timeout: float,
        lock_retry_seconds: float,
        file_mode: int,
        create: bool,
    ) -> None:
        self.location = location
        self._busy_timeout = busy_timeout
        self._lock_retry_seconds = lock_retry_seconds
        self._file_mode = file_mode
        self._lock = threading.RLock()
        self._write_lock = process_lock(location)
        self._turn = WriteTurn(location, file_mode)  # used only once on the file
        self._stand_in = False  # connected to an empty in-memory queue, not to the file
        self._conn: sqlite3.Connection | None = None
        self._on_file = False  # connected to the file itself (not to :memory:)
        self._connections = 0  # how many it has had: a stand-in and then the file
        self._wal: WalFile | None = None  # the file's WAL, synced after durable writes
        with self._sqlite_errors():
            self._open(create)

    # -- opening -------------------------------------------------------------------------------
    def _open(self, create: bool) -> None:
        """Connect to the file once it is known to be a queue (or new); any other file is
        refused before anything in it changes."""
        if self.location == ":memory:":
            self._attach(":memory:")
            return
        kind = recognise(self.location)
        if kind is FileKind.ABSENT:
            check_folder(self.location)
        if kind is not FileKind.QUEUE and not create:
            self._attach(":memory:")
            self._stand_in = True
            return
        if kind is FileKind.ABSENT:
            create_file(self.location, self._file_mode)
        was_stand_in, self._stand_in = self._stand_in, False
        try:
            self._attach(self.location)
        except BaseException:
            self._stand_in = was_stand_in
            raise

    def _attach(self, location: str) -> None:
        conn = sqlite3.connect(
            location,
            timeout=self._busy_timeout,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,
        )
        previous, was_on_file = self._conn, self._on_file
        self._on_file = location != ":memory:"  # a stand-in's writes need no turn
        try:
            # Before WAL mode is set: that would rewrite the header of a file we then refuse.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > schema.SCHEMA_VERSION:
                raise newer_schema_error(self.location, version)
            self._conn = conn
            self._configure(in_memory=location == ":memory:")
            if not schema.is_current(conn):
                # A migration may rebuild a table that others reference (see migration 3);
                # foreign keys can only be switched outside a transaction.
                conn.execute("PRAGMA foreign_keys = OFF")
                self.write(lambda conn: schema.upgrade(conn, self.location), durable=True)
                conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            self._conn, self._on_file = previous, was_on_file
            conn.close()
            raise
        self._connections += 1
        if previous is not None:
            previous.close()

    def _configure(self, in_memory: bool) -> None:
        conn = self._conn
        assert conn is not None
        mode = _switch_to_wal(conn, self._busy_timeout)
        if mode.lower() != "wal" and not in_memory:
            log.warning("database %s is in %s journal mode, not WAL", self.location, mode)
        if self._wal is not None:
            self._wal.close()
        self._wal = WalFile(self.wal_path()) if mode.lower() == "wal" and not in_memory else None
        # NORMAL in WAL mode survives application crashes; only a power loss can drop the
        # last transitions, which merely re-runs jobs. An enqueue is durable: its commit is
        # synced before it returns (see _sync_wal).
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        # The WAL is reused from its start after each checkpoint; this caps the size it keeps
        # on disk after a burst (a bulk enqueue or a busy pool can grow it to tens of MB).
        conn.execute("PRAGMA journal_size_limit = 16777216")

    def holds_file(self) -> bool:
        """Connected to the queue's file (not to a stand-in, for want of one)."""
        with self._lock:
            self._connection()  # a file that appeared meanwhile is taken up
            return not self._stand_in

    def _connection(self) -> sqlite3.Connection:
        """The connection to read from; a stand-in gives way to the file once there is one."""
        if self._stand_in and recognise(self.location) is FileKind.QUEUE:
            self._open(create=False)
        assert self._conn is not None
        return self._conn

    @contextlib.contextmanager
    def _sqlite_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as error:
            raise store_error(self.location, error) from None

    def wal_path(self) -> str:
        return os.path.abspath(self.location) + "-wal"

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            if self._wal is not None:
                self._wal.close()
            self._turn.close()

    # -- reads ---------------------------------------------------------------------------------
    def read(self, sql: str, params: Params = ()) -> list[Any]:
        with self._lock, self._sqlite_errors():
            return self._connection().execute(sql, params).fetchall()

    def read_as(self, rows: RowMap[D], sql: str, params: Params = ()) -> list[D]:
        """The rows of a read as objects, made once the connection is free for other reads."""
        with self._lock, self._sqlite_errors():
            cursor = self._connection().execute(sql, params)
            found, description = cursor.fetchall(), cursor.description
        return rows.from_rows(sql, found, description)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one read transaction: its reads see one state of the queue."""
        with self._lock, self._sqlite_errors():
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def change_token(self) -> int:
        # data_version counts per connection: a stand-in that gives way to the file must not
        # hand out the same number again.
        version = self.read("PRAGMA data_version")[0][0]
        return (self._connections << 32) + int(version)

    def wait_for_writers(self) -> None:
        if self._on_file:
            # A writer of this process finishes first and none starts meanwhile: one of them
            # finding the lock file shared would have to queue for it.
            with self._write_lock:
                self._turn.wait_until_passed()

    # -- the write path ------------------------------------------------------------------------
    def write(
        self,
        body: Callable[[sqlite3.Connection], T],
        durable: bool = False,
        gives_work: bool | Callable[[T], bool] = True,
    ) -> T:
        """Run `body` in one BEGIN IMMEDIATE transaction and commit it, then ring the queue's
        bell (see writelock.py) if it may have given a worker work: `gives_work`, or what it
        says of the result.

        BEGIN IMMEDIATE takes SQLite's single write lock before anything is read, so a
        read-then-update inside `body` cannot interleave with any other writer, in this
        process or another. Only taking the lock is retried (with backoff, beyond the busy
        timeout): `body` runs once, and any failure after it started rolls everything back."""
        with self._lock, self._sqlite_errors():
            if self._stand_in:
                self._open(create=True)  # the first write creates the database
            sync_after = durable and self._wal is not None
            with self._process_turn() as turn:
                result = self._transaction(body, durable and not sync_after)
                if turn is not None and (
                    gives_work(result) if callable(gives_work) else gives_work
                ):
                    turn.ring()
            if sync_after:
                self._sync_wal()
            return result

    def _sync_wal(self) -> None:
        """Make the commit just made durable by syncing the WAL, after the write turn was
        passed on: the next writer's transaction runs while this one waits for the disk."""
        wal = self._wal
        assert wal is not None
        try:
            wal.sync()
        except OSError as error:
            raise StoreError(
                f"the write to {self.location} was made but may not survive a power loss: "
                f"syncing {wal.path} failed: {error.strerror}"
            ) from None

    def _transaction(self, body: Callable[[sqlite3.Connection], T], durable: bool) -> T:
        conn = self._conn
        assert conn is not None
        if durable:
            conn.execute("PRAGMA synchronous = FULL")
        try:
            self._begin_immediate(conn)
            try:
                result = body(conn)
                conn.execute("COMMIT")
                return result
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        finally:
            if durable:
                conn.execute("PRAGMA synchronous = NORMAL")

    def bell_path(self) -> str | None:
        """The file a commit that may give a worker work writes to (see writelock.py)."""
        return self._turn.bell_path() if self._on_file else None

    @contextlib.contextmanager
    def _process_turn(self) -> Iterator[WriteTurn | None]:
        """This process's turn to write, then the database's among processes (see
        writelock.py), each waited for no longer than this store would wait for SQLite's
        lock. Yields the database's turn (None where there is none: in memory)."""
        waited = self._busy_timeout + self._lock_retry_seconds
        if not self._write_lock.acquire(timeout=waited):
            # Another thread of this process writes, or waits in line for the same turn.
            raise StoreWaitingError(f"the database {self.location} is busy in this process")
        try:
            turn = self._turn if self._on_file else None
            if turn is not None and not turn.acquire(waited):
                raise StoreWaitingError(
                    f"the database {self.location} stayed locked for {waited:g} s"
                )
            try:
                yield turn
            finally:
                if turn is not None:
                    turn.release()
        finally:
            self._write_lock.release()

    def _begin_immediate(self, conn: sqlite3.Connection) -> None:
        delay = 0.005
        deadline = time.monotonic() + self._lock_retry_seconds
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as error:
                if not _is_locked(error):
                    raise
                if time.monotonic() >= deadline:
                    waited = self._busy_timeout + self._lock_retry_seconds
                    raise StoreBusyError(
                        f"the database {self.location} stayed locked for {waited:g} s"
                    ) from None
                # Quiet: a write that gets through after waiting has nothing to report, and
                # one that never does raises StoreBusyError, one sentence.
                log.debug("database locked, retrying in %.0f ms", delay * 1000)
                time.sleep(delay)
                delay = min(delay * 2, 1.0)


def _switch_to_wal(conn: sqlite3.Connection, wait: float) -> str:
    """Put the file in WAL mode (once set, it stays with the file); returns the mode it is
    in. The switch needs the file to itself, and SQLite gives up on it at once, without its
    busy handler, while another connection holds a lock: as one does while it creates the
    same new file (two pools started together on a new queue). Tried again for `wait` s."""
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
        return "wal"
    deadline = time.monotonic() + wait
    delay = 0.002
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as error:
            if not _is_locked(error) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _is_locked(error: sqlite3.OperationalError) -> bool:
    text = str(error).lower()
    return "locked" in text or "busy" in text
