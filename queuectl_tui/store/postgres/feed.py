"""The PostgreSQL store's change feed: LISTEN on the queue's channel, one connection per feed.

The triggers of migrations 1 and 10 NOTIFY the channel (one per schema) when a job is
enqueued, made pending again, made due, or ends a run in a queue with a limit, or a queue's
settings change; a notification arrives when its transaction commits, on the feed's socket,
which the waiting thread selects on. The feed also reports a change every BACKSTOP seconds
whatever it heard, so that a lost notification (the connection dropped and came back) delays a
job, never strands it."""

from __future__ import annotations

import contextlib
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
        self._conn: psycopg.Connection[Any] | None = None
        self._last_look = 0.0  # the first drain looks: what came before LISTEN went unheard
        self._connect()

    def _connect(self) -> None:
        try:
            conn = psycopg.connect(self._conninfo, **self._options)
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        except psycopg.Error as error:
            self._conn = None
            raise StoreError(f"cannot listen to {self._shown}: {error}") from error
        self._conn = conn

    def fileno(self) -> int | None:
        return None if self._conn is None else self._conn.pgconn.socket

    def wait_at_most(self) -> float:
        return max(0.0, BACKSTOP - (time.monotonic() - self._last_look))

    def drain(self) -> bool:
        heard = False
        if self._conn is not None:
            try:
                pgconn = self._conn.pgconn
                pgconn.consume_input()
                while pgconn.notifies() is not None:
                    heard = True
            except psycopg.Error:
                self._drop()
        if self._conn is None or self._conn.closed:
            # Notifications sent while it was away are lost: look now, and listen again.
            heard = True
            self._drop()
            with contextlib.suppress(StoreError):  # if not, the backstop looks again soon
                self._connect()
        if time.monotonic() - self._last_look >= BACKSTOP:
            heard = True
        if heard:
            self._last_look = time.monotonic()
        return heard

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None

    def close(self) -> None:
        self._drop()
