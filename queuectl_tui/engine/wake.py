"""Waking idle workers: new work from any process starts within milliseconds, while an idle
pool sleeps in the kernel instead of polling.

The dispatcher itself waits on the store's change feed (see `Store.change_feed`; for SQLite,
inotify on the queue's bell, which a commit that may give a worker work rings, or polling;
for PostgreSQL, LISTEN) beside its running commands, while a worker is free and found no
work: a ring makes it claim at once, in one transaction for every free worker, with no other
thread woken on the way. The pools' own claims, results and heartbeats ring nothing. It also
looks for work when the next known `run_at` arrives (a retry's backoff ending, a job
scheduled for later), so a due job is never slept through. While every worker is busy the
feed is only drained now and then: the dispatcher claims the next jobs in the transaction that
settles the last ones.

Measured with `queuectl bench --only pickup` (QUEUECTL_WAKE=poll for the second) on 2 cores:
inotify, idle pool 0.1-0.2% of a core, pickup p50 0.9 ms / p95 1.4 ms after the enqueue
committed; poll, 4% of a core, p50 1.6 ms / p95 2.7 ms.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Collection
from typing import Protocol

from ..store import ChangeFeed, Store, StoreError

# While every worker is busy the feed is still drained this often (a PostgreSQL listener that
# is never read would hold up the server's queue of notifications); its news is not acted on.
BUSY_DRAIN = 0.5


class Doorbell:
    """Wakes the dispatcher's poll loop from the pool's other threads (a stop, a recovered
    job): a pipe it watches."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)  # a full pipe already means "wake up"

    def fileno(self) -> int:
        return self._read

    def ring(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._write, b"!")

    def clear(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self._read, 4096):
                pass

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)


class Watches(Protocol):
    """What the alarm needs of the dispatcher's poll loop (runner.Supervisor)."""

    def watch(self, fd: int) -> None: ...

    def unwatch(self, fd: int) -> None: ...


class WorkAlarm:
    """When an idle worker of the dispatcher looks for work: its doorbell rang, the change
    feed heard a commit that may have given it work, or the next known run_at came. Used by
    the dispatcher's thread only."""

    def __init__(
        self,
        doorbell: Doorbell,
        feed: ChangeFeed | None,
        clock: Callable[[], int],
        poll: Watches,
    ) -> None:
        self._doorbell = doorbell
        self._feed = feed
        self._poll = poll
        self._feed_fd: int | None = None  # the feed's descriptor the poll watches, if any
        self._clock = clock  # the store's, in ms: run_at is in its time
        self.listening = False  # a worker is free and found no work
        self._drain_at = 0.0  # monotonic: the feed is drained by then at the latest
        self._next_due: int | None = None  # the earliest known run_at still to come
        self._due_known = False  # whether _next_due is up to date

    def listen(self, on: bool) -> None:
        """Start or stop acting on the feed: only a worker that found no work wants it. (A
        ring heard meanwhile stays pending: the poll sees it at once.)"""
        if on == self.listening:
            return
        self.listening = on
        if on and self._feed is not None:  # polled: the next look comes as soon as it may
            self._drain_at = min(self._drain_at, time.monotonic() + self._feed.wait_at_most())
        self._watch_feed()

    def _watch_feed(self) -> None:
        """Have the poll watch the feed's present descriptor while listening, and nothing
        else. A feed may connect again on another descriptor (PostgreSQL's): the old number
        is let go at once, before this thread can be handed it for a command's pipe."""
        wanted = self._feed.fileno() if self.listening and self._feed is not None else None
        if wanted == self._feed_fd:
            return
        if self._feed_fd is not None:
            self._poll.unwatch(self._feed_fd)
        if wanted is not None:
            self._poll.watch(wanted)
        self._feed_fd = wanted

    def wait_at_most(self, now: float) -> float:
        """Seconds until the alarm wants a look of its own (inf: none)."""
        wait = math.inf if self._feed is None else max(0.0, self._drain_at - now)
        if self.listening and self._next_due is not None:
            wait = min(wait, max(0.0, (self._next_due - self._clock()) / 1000))
        return wait

    def rang(self, ready: Collection[int]) -> bool:
        """After the poll: consume what rang; True if a free worker should look for work."""
        look = False
        if self._doorbell.fileno() in ready:
            self._doorbell.clear()
            self._due_known = False
            look = True
        if self._feed_heard(ready):
            self._due_known = False
            look = look or self.listening
        if self.listening and self._next_due is not None and self._clock() >= self._next_due:
            self._next_due = None
            self._due_known = False
            look = True
        return look

    def exchanged(self, store: Store, made_work: bool, asked_at: int) -> None:
        """After an exchange (at `asked_at`, the store's ms): while a worker has no work,
        know when the next job is due. It is read again only when it may have changed (an
        exchange scheduled a retry, or something rang), and from the exchange's time on: a
        job that fell due since was not due for its claims."""
        if made_work:
            self._due_known = False
        if not self.listening or self._due_known:
            return
        try:
            self._next_due = store.next_run_at(asked_at)
            self._due_known = True
        except StoreError:
            self._next_due = None  # the dispatcher's own idle look finds it

    def _feed_heard(self, ready: Collection[int]) -> bool:
        """Drain the feed if it rang or its time came; True if it heard a commit."""
        feed = self._feed
        if feed is None or (self._feed_fd not in ready and time.monotonic() < self._drain_at):
            return False
        try:
            heard = feed.drain()
        except StoreError:
            heard = True  # cannot tell: look
        self._watch_feed()
        wait = feed.wait_at_most()
        self._drain_at = time.monotonic() + (wait if self.listening else max(wait, BUSY_DRAIN))
        return heard
