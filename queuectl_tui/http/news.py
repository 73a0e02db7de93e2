"""What a server hears of the queue's changes, for `GET /events`: one listener per server
(listen.py) waits on the store's change feed for every stream, from the first stream on;
changes within GAP seconds of each other are told once. Where the feed cannot listen, a
change is told every FALLBACK_EVERY seconds instead: pages stay live, only later."""

from __future__ import annotations

import asyncio
import contextlib

from .. import service
from ..config import Settings
from ..listen import ChangeListener

GAP = 0.5  # seconds: a busy queue is told at most twice a second
FALLBACK_EVERY = 2.0  # seconds between changes told when the feed cannot listen
RESTART_AFTER = 30.0  # seconds between tries to start a listener again


class ChangeNews:
    """The version of the queue as this server last heard of it, and a way to await the
    next one. Lives on the event loop; the listener thread hands each change over to it. A
    listener that could not open the store, or whose feed broke, is started again (at most
    every RESTART_AFTER seconds); meanwhile a change is told every FALLBACK_EVERY seconds."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._listener: ChangeListener | None = None
        self._changed: asyncio.Event | None = None
        self._starting: asyncio.Lock | None = None
        self._next_start = 0.0  # loop time before which no new listener is tried
        self._next_fallback = 0.0  # loop time of the next change told without a listener
        self.version = 0

    async def _listening(self) -> bool:
        """Start a listener if none runs (and one may be tried now); whether one listens."""
        loop = asyncio.get_running_loop()
        self._starting = self._starting or asyncio.Lock()
        async with self._starting:
            running = self._listener is not None and self._listener.is_alive()
            if not running and loop.time() >= self._next_start:
                self._next_start = loop.time() + RESTART_AFTER
                if self._listener is not None:
                    self._listener.stop()

                def heard() -> None:  # on the listener's thread
                    with contextlib.suppress(RuntimeError):  # the loop closed: server stopping
                        loop.call_soon_threadsafe(self._bump)

                # Made on a worker thread: it opens the store (a PostgreSQL connect), which
                # must not hold up the event loop.
                self._listener = await asyncio.to_thread(
                    ChangeListener, lambda: service.open_queue(self._settings), heard, GAP
                )
                self._listener.start()
        # A feed without a descriptor is polled by the listener's thread: it still tells.
        listener = self._listener
        return listener is not None and listener.is_alive() and not listener.failed

    def _bump(self) -> None:
        self.version += 1
        if self._changed is not None:
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()

    async def wait(self, version: int, timeout: float) -> int:
        """The version after `version`, or `version` again if none came within `timeout`."""
        changed = self._changed = self._changed or asyncio.Event()
        listening = await self._listening()
        if self.version != version:
            return self.version
        if not listening:
            loop = asyncio.get_running_loop()
            wait = self._next_fallback - loop.time()
            if wait > timeout:
                await asyncio.sleep(timeout)
                return self.version
            await asyncio.sleep(max(0.0, wait))
            if self.version == version:  # no other stream told it meanwhile
                self._next_fallback = loop.time() + FALLBACK_EVERY
                self._bump()
            return self.version
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout)
        return self.version

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
