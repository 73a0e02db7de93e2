"""GET /healthz's own way to the database: a thread and a store of its own, so that a flood
of reads holding the shared thread pool cannot make a healthy server look dead. Probes that
arrive while a check runs share its answer, so that probes cannot pile up either."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from .. import service
from ..config import Settings
from ..errors import Damaged, Unavailable
from ..store import Store, StoreError

# A database that has not answered a read by then is reported as down: a probe learns of an
# outage within a second or two, not after the connection's own timeouts.
CHECK_TIMEOUT_S = 1.5


class HealthCheck:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._pool: ThreadPoolExecutor | None = None  # made on first use, again after close
        self._store: Store | None = None  # used on the pool's one thread only
        self._running: Future[str | None] | None = None
        self._lock = threading.Lock()

    def _check(self) -> str | None:
        """None when the database answers a read, else why not, in words that name no path,
        host or error text (anyone may ask)."""
        try:
            if self._store is None:
                self._store = service.open_queue(self._settings)
            service.queue_status(self._store)
        except Damaged:
            return "the database is damaged"
        except (StoreError, Unavailable):
            return "the database does not answer"
        return None

    async def problem(self) -> str | None:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="queuectl-health")
            if self._running is None or self._running.done():
                self._running = self._pool.submit(self._check)
            running = self._running
        try:
            answer = asyncio.shield(asyncio.wrap_future(running))
            return await asyncio.wait_for(answer, CHECK_TIMEOUT_S)
        except TimeoutError:
            return f"the database did not answer within {CHECK_TIMEOUT_S:g} s"

    def close(self) -> None:
        with self._lock:
            pool, self._pool, self._running = self._pool, None, None
        if pool is None:
            return
        # A check that still hangs on the database is left behind: the process ends anyway.
        with contextlib.suppress(TimeoutError):
            pool.submit(self._close_store).result(timeout=CHECK_TIMEOUT_S)
        pool.shutdown(wait=False)

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
