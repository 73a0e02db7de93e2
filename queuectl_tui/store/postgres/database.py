"""The connections of the PostgreSQL stores of one process to one queue: a shared psycopg
pool, transactions with their errors in plain words, and the database's clock.

Every store of a process that names the same database and schema borrows from one pool (the
engine opens a store per thread, the HTTP server one per request thread), so a pool of many
workers holds a handful of connections. The pool goes when its last store closes."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors
from psycopg_pool.base import AttemptWithBackoff

from ..base import StoreBusyError, StoreError
from . import schema
from .clock import clock_of
from .statements import SQL
from .url import Target

T = TypeVar("T")

# The pool reports connections it failed to make in the background; the store reports the
# failures that matter to its callers, once, in a sentence.
logging.getLogger("psycopg.pool").propagate = False
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

DEFAULT_WAIT = 30.0  # seconds a call waits for a connection, unless its store says otherwise
CONNECT_TIMEOUT = 3  # seconds to reach the server before a store gives up (libpq's least: 2)
# A call that has waited this long for a connection checks that the server answers at all
# (a connection of its own): if not, it fails now rather than at the end of its wait, and
# calls wait at most UNREACHABLE_WAIT until the pool connects again.
PROBE_AFTER = 0.5
PROBE_FRESH = 1.0  # seconds a probe that reached the server is trusted for
SERVER_GONE = "the server does not answer (it takes no connection)"
UNREACHABLE_WAIT = 0.5
# The pool's attempts to connect again after losing the server come this often (its own
# back-off grows to many seconds): a pool is back within about this long of the server.
RECONNECT_EVERY = 0.25
POOL_SIZE = 8  # connections at most, shared by the stores of one process
CHECK_IDLE_AFTER = 1.0  # seconds idle after which a connection is checked before it is lent
CLOCK_WAIT = 2.0  # seconds a new reading may wait for a connection when there is an old one
# A host frozen (SIGSTOP, a paused VM) inside one of its transactions holds that
# transaction's row locks: the server ends such a session after this long, so that the other
# hosts' recovery never waits on a frozen one for longer. Every transaction of the store runs
# its statements back to back (bulk enqueue, which waits for its input, lifts it).
IDLE_IN_TRANSACTION_MS = 5_000
# And no statement waits for a lock longer than this: it fails, and its caller tries again.
LOCK_TIMEOUT_MS = 10_000
# Conflicts PostgreSQL resolves by aborting one transaction: it is run again, this often.
RETRIES = 5
_RETRIED = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure, pg_errors.LockNotAvailable)


class Database:
    """A pool of connections to one queue's schema, with the database's clock."""

    def __init__(self, target: Target, planned_once: bool = False) -> None:
        self.target = target
        self.planned_once = planned_once
        self._idle_since: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = (
            weakref.WeakKeyDictionary()
        )
        self._pool = _QuickPool(  # opened by ensure_schema
            target.conninfo,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs={
                "options": (
                    f"-c search_path={target.schema}"
                    f" -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
                    f" -c lock_timeout={LOCK_TIMEOUT_MS}"
                    # A statement's plan made once and kept (see StoreOptions.planned_once).
                    + (" -c plan_cache_mode=force_generic_plan" if planned_once else "")
                ),
                "connect_timeout": CONNECT_TIMEOUT,
                "application_name": "queuectl",
                # Transactions are opened where they are wanted (connection()), so that a
                # single read costs one round trip (read()).
                "autocommit": True,
            },
            # A connection the server dropped (a restart, pg_terminate_backend) is replaced
            # before it is lent, rather than failing the next call: checked when it has been
            # idle a while (a busy pool's connections are not, and skip the round trip).
            check=self._check_if_idle,
            reset=self._returned,
            open=False,
            name=f"queuectl:{target.schema}",
        )
        self._users = 0
        self._schema_checked = False  # once per process and queue
        self._clock = clock_of(target.conninfo)
        self._unreachable = False  # a probe found the server gone; cleared by a connection
        self._probed_at = -PROBE_FRESH  # when a probe last reached the server (monotonic)

    def _returned(self, conn: psycopg.Connection[Any]) -> None:
        self._idle_since[conn] = time.monotonic()

    def _check_if_idle(self, conn: psycopg.Connection[Any]) -> None:
        if time.monotonic() - self._idle_since.get(conn, 0.0) > CHECK_IDLE_AFTER:
            psycopg_pool.ConnectionPool.check_connection(conn)

    # -- transactions ------------------------------------------------------------------------
    @contextmanager
    def connection(self, wait: float = DEFAULT_WAIT) -> Iterator[psycopg.Connection[Any]]:
        """A connection inside one transaction, committed when the block ends without error
        (rolled back on one);
        `wait`: seconds to wait for a free connection (or the server) before giving up."""
        with self.errors(wait), self._lend(wait) as conn, conn.transaction():
            yield conn

    @contextmanager
    def _lend(self, wait: float) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the pool, waited for up to `wait` seconds while the server answers;
        a fast failure (PoolTimeout) once it does not."""
        first = min(wait, UNREACHABLE_WAIT if self._unreachable else PROBE_AFTER)
        try:
            conn = self._pool.getconn(timeout=first)
        except psycopg_pool.PoolTimeout:
            if first >= wait:
                raise
            if self._unreachable or not self._server_answers():
                # Said as what it is (not "no connection within `wait` s"), and not retried
                # as a busy pool's timeout would be.
                raise psycopg.OperationalError(SERVER_GONE) from None
            conn = self._pool.getconn(timeout=wait - first)
        self._unreachable = False
        try:
            with conn:  # as the pool's own connection(): commit, or roll back on an error
                yield conn
        finally:
            self._pool.putconn(conn)

    def _server_answers(self) -> bool:
        """Whether the server takes a connection (the pool's may all be busy, or it is
        between two attempts to connect again). Remembered for PROBE_FRESH seconds."""
        if time.monotonic() - self._probed_at < PROBE_FRESH:
            return True
        try:
            psycopg.connect(
                self.target.conninfo,
                connect_timeout=CONNECT_TIMEOUT,
                application_name="queuectl probe",
            ).close()
        except psycopg.Error:
            self._unreachable = True
            return False
        self._probed_at = time.monotonic()
        return True

    def ensure_schema(self, wait: float) -> None:
        """Create or migrate the queue's schema, unless this process did already: on a
        connection of its own, so that a server that cannot be reached is reported at once
        and in its own words (the pool would only time out)."""
        if self._schema_checked:
            return
        target = self.target
        with (
            self.errors(wait),
            psycopg.connect(
                target.conninfo,
                connect_timeout=CONNECT_TIMEOUT,
                options=f"-c search_path={target.schema}",
                application_name="queuectl migrate",
            ) as conn,
        ):
            schema.ensure_current(conn, target.schema, target.shown)
        self._pool.open(wait=False)
        self._schema_checked = True

    def run(
        self,
        body: Callable[[psycopg.Connection[Any]], T],
        durable: bool = True,
        wait: float = DEFAULT_WAIT,
    ) -> T:
        """`body` in one transaction, run again when PostgreSQL aborted it for a deadlock or a
        serialization conflict. Not durable: the commit returns before the WAL is flushed (a
        crash of the server may lose it, never half of it), for the engine's own bookkeeping,
        whose loss at most runs a job again."""
        for attempt in range(RETRIES):
            try:
                with self.connection(wait) as conn:
                    if not durable:
                        conn.execute("SET LOCAL synchronous_commit = off")
                    return body(conn)
            except StoreBusyError:
                if attempt == RETRIES - 1:
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    @contextmanager
    def for_one_statement(self, wait: float = DEFAULT_WAIT) -> Iterator[psycopg.Connection[Any]]:
        """A connection outside any transaction, for one statement on its own (no BEGIN, no
        COMMIT: one round trip; a statement reads one snapshot anyway)."""
        with self.errors(wait), self._lend(wait) as conn:
            yield conn

    def read(self, sql: str, params: Any = None, wait: float = DEFAULT_WAIT) -> list[Any]:
        """The rows of one statement, run on its own (see for_one_statement)."""
        with self.for_one_statement(wait) as conn:
            return conn.execute(sql, params).fetchall()

    def errors(self, wait: float = DEFAULT_WAIT) -> AbstractContextManager[None]:
        return store_errors(self.target.shown, wait)

    # -- the clock ---------------------------------------------------------------------------
    def now(self) -> int:
        """The database server's clock in ms (see clock.py: one reading per server and
        process, carried forward by this host's monotonic clock)."""
        return self._clock.now(self._read_clock, DEFAULT_WAIT, CLOCK_WAIT)

    def _read_clock(self, wait: float) -> tuple[int, float]:
        with self.connection(wait) as conn:
            before = time.monotonic()
            row = conn.execute(SQL["now_ms"]).fetchone()
            after = time.monotonic()
        assert row is not None
        return int(row[0]), (before + after) / 2

    # -- sharing -----------------------------------------------------------------------------
    def listen_conninfo(self) -> tuple[str, dict[str, Any]]:
        """What a connection of its own (a change feed's) connects with."""
        return self.target.conninfo, {
            "connect_timeout": CONNECT_TIMEOUT,
            "application_name": "queuectl listen",
            "autocommit": True,
        }

    def close_pool(self) -> None:
        self._pool.close()


class _QuickAttempt(AttemptWithBackoff):
    """The pool's attempts to connect again, every RECONNECT_EVERY seconds (with the pool's
    jitter) rather than backing off to many: a server that is back is found at once, and an
    attempt to a server that is down costs one refused connection."""

    INITIAL_DELAY = RECONNECT_EVERY
    DELAY_BACKOFF = 1.0


class _QuickPool(psycopg_pool.ConnectionPool):
    """A psycopg pool whose attempts to connect again do not back off (_QuickAttempt)."""

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        if attempt is None:
            attempt = _QuickAttempt(timeout=self.reconnect_timeout)
        super()._add_connection(attempt, growing)


@contextmanager
def store_errors(shown: str, wait: float = DEFAULT_WAIT) -> Iterator[None]:
    """psycopg's errors as the store's: one sentence that names the database."""
    try:
        yield
    except _RETRIED as error:
        raise StoreBusyError(f"{shown}: {_first_line(error)}") from error
    except psycopg_pool.PoolTimeout as error:
        raise StoreBusyError(
            f"no connection to {shown} within {wait:g} s "
            "(the server is unreachable or every connection is busy)"
        ) from error
    except psycopg.OperationalError as error:
        raise StoreError(
            f"the PostgreSQL database {shown} cannot be used: {_first_line(error)}"
        ) from error
    except psycopg.DataError as error:
        raise StoreError(f"PostgreSQL refused a value: {_first_line(error)}") from error


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


_shared: dict[tuple[str, str, bool], Database] = {}
_shared_lock = threading.Lock()


def borrow(target: Target, planned_once: bool = False) -> Database:
    """The process's pool for `target` (one more for statements planned once), made on first
    use."""
    key = (target.conninfo, target.schema, planned_once)
    with _shared_lock:
        database = _shared.get(key)
        if database is None:
            database = _shared[key] = Database(target, planned_once)
        database._users += 1
        return database


def give_back(database: Database) -> None:
    with _shared_lock:
        database._users -= 1
        if database._users > 0:
            return
        key = (database.target.conninfo, database.target.schema, database.planned_once)
        if _shared.get(key) is database:
            del _shared[key]
    database.close_pool()
