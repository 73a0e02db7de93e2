"""Telling a face (the console, a web page) that the queue changed, by any process, without
reading it on a timer: one thread waits on the store's change feed and calls back.

A busy queue commits hundreds of times a second; a face needs to look at most every `gap`
seconds. So the first change after a quiet spell is told at once (an operator's retry shows
within milliseconds), and changes that follow within `gap` are told together, once, at its
end."""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable

from .store import ChangeFeed, Store, StoreError

POLL_FLOOR = 0.25  # a feed without a descriptor is drained at most this often


class ChangeListener(threading.Thread):
    def __init__(
        self, open_store: Callable[[], Store], on_change: Callable[[], None], gap: float
    ) -> None:
        super().__init__(name="queuectl-listen", daemon=True)
        self._on_change = on_change
        self._gap = gap
        self._halt = threading.Event()
        self._stop_r, self._stop_w = os.pipe()
        self._store: Store | None = None
        self._feed: ChangeFeed | None = None
        try:
            self._store = open_store()
            self._feed = self._store.change_feed()
        except StoreError:
            if self._store is not None:
                self._store.close()
                self._store = None
        self.failed = False  # set if the feed broke while listening

    @property
    def listening(self) -> bool:
        """True if changes wake this listener as they happen (not by polling, not broken)."""
        return self._feed is not None and self._feed.fileno() is not None and not self.failed

    def stop(self) -> None:
        self._halt.set()
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"x")

    def run(self) -> None:
        try:
            if self._feed is not None:
                self._listen(self._feed)
        except StoreError:
            self.failed = True  # the face's own timer still reads now and then
        finally:
            if self._feed is not None:
                self._feed.close()
            if self._store is not None:
                self._store.close()
            os.close(self._stop_r)
            os.close(self._stop_w)

    def _listen(self, feed: ChangeFeed) -> None:
        while not self._halt.is_set():
            descriptor = feed.fileno()
            waits = [self._stop_r] if descriptor is None else [self._stop_r, descriptor]
            wait = feed.wait_at_most() if descriptor is not None else POLL_FLOOR
            select.select(waits, [], [], max(wait, 0.0))
            if self._halt.is_set():
                return
            if feed.drain():
                self._on_change()
                # What else changes meanwhile is told once, when the gap is over.
                if self._halt.wait(self._gap):
                    return
