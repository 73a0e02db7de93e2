"""The PostgreSQL store's change feed: LISTEN on the queue's channel, one connection per feed.

The triggers of migrations 1 and 10 NOTIFY the channel (one per schema) when a job is
enqueued, made pending again, made due, or ends a run in a queue with a limit, or a queue's
settings change; a notification arrives when its transaction commits, on the feed's socket,
which the waiting thread selects on. The feed also reports a change every BACKSTOP seconds
whatever it heard, so that a lost notification (the connection dropped and came back) delays a
job, never strands it."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import psycopg
from psycopg import sql

from ..base import ChangeFeed, StoreError

BACKSTOP = 1.0  # seconds: at most this long between two looks at the queue


class ListenFeed(ChangeFeed):
    mode = "listen"

    def __init__(self, conninfo: str, options: dict[str, Any], schema: str, shown: str) -> None:
        self._conninfo = conninfo
        self._options = options
        self._channel = f"queuectl.{schema}"
        self._shown = shown
        self._lock = threading.Lock()  # the connection, swapped by a reconnecting thread
        self._conn: psycopg.Connection[Any] | None = None
        self._reconnecting: threading.Thread | None = None
        self._news = False  # connected again: what was sent meanwhile went unheard
        self._closed = False
        self._last_look = 0.0  # the first drain looks: what came before LISTEN went unheard
        self._connect()

    def _connect(self) -> None:
        try:
            conn = psycopg.connect(self._conninfo, **self._options)
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        except psycopg.Error as error:
            raise StoreError(f"cannot listen to {self._shown}: {error}") from error
        with self._lock:
            closed, self._news = self._closed, True
            if not closed:
                self._conn = conn
        if closed:
            conn.close()

    def _reconnect(self) -> None:
        """Listen again, on a thread of its own: a server that does not answer holds up
        only that thread (for up to the connect timeout), never the waiter, which goes on
        with its own work and looks at the queue every BACKSTOP meanwhile."""
        with self._lock:
            if self._closed or (self._reconnecting and self._reconnecting.is_alive()):
                return
            self._reconnecting = threading.Thread(
                target=self._connect_quietly, name="queuectl-listen", daemon=True
            )
            self._reconnecting.start()

    def _connect_quietly(self) -> None:
        with contextlib.suppress(StoreError):  # if not, the next drain tries again
            self._connect()

    def fileno(self) -> int | None:
        conn = self._conn
        return None if conn is None else conn.pgconn.socket

    def wait_at_most(self) -> float:
        return max(0.0, BACKSTOP - (time.monotonic() - self._last_look))

    def drain(self) -> bool:
        heard = False
        conn = self._conn
        if conn is not None:
            try:
                pgconn = conn.pgconn
                pgconn.consume_input()
                while pgconn.notifies() is not None:
                    heard = True
            except psycopg.Error:
                self._drop(conn)
            if conn.closed:
                self._drop(conn)
        if self._conn is None:
            # Notifications sent while it was away are lost: look now, and listen again.
            heard = True
            self._reconnect()
        with self._lock:
            if self._news:
                heard, self._news = True, False
        if time.monotonic() - self._last_look >= BACKSTOP:
            heard = True
        if heard:
            self._last_look = time.monotonic()
        return heard

    def _drop(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            if self._conn is conn:
                self._conn = None
        with contextlib.suppress(psycopg.Error):
            conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()
