"""The work alarm: an idle dispatcher hears of new work from the change feed itself, learns when
the next job is due, and leaves the feed alone while every worker is busy."""

from __future__ import annotations

import os
import select
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_helpers import wait_until
from store_helpers import claim, register, settle, sqlite_file

from queuectl_tui.engine.wake import Doorbell, WorkAlarm
from queuectl_tui.models import JobSpec
from queuectl_tui.store import ChangeFeed, Store, open_store
from queuectl_tui.store.sqlite.changes import inotify_available
from queuectl_tui.timeutil import now_ms

QUIET = 0.3  # how long an alarm is watched for a wrong ring


class Poll:
    """The dispatcher's poll loop, reduced to what the alarm asks of it."""

    def __init__(self) -> None:
        self._poller = select.poll()
        self.watched: set[int] = set()

    def watch(self, fd: int) -> None:
        self._poller.register(fd, select.POLLIN)
        self.watched.add(fd)

    def unwatch(self, fd: int) -> None:
        self._poller.unregister(fd)
        self.watched.discard(fd)

    def ready(self, wait: float) -> list[int]:
        return [fd for fd, _ in self._poller.poll(wait * 1000)]


class Dispatcher:
    """An alarm over a store of its own, as the dispatcher has."""

    def __init__(self, db: Path, mode: str) -> None:
        self.store: Store = open_store(db)
        self.feed: ChangeFeed = self.store.change_feed(mode, work_only=True)
        self.doorbell = Doorbell()
        self.poll = Poll()
        self.poll.watch(self.doorbell.fileno())
        self.alarm = WorkAlarm(self.doorbell, self.feed, self.store.now, self.poll)

    def turn(self, most: float) -> bool:
        """One turn of the loop: wait as the alarm asks (at most `most`), then ask it."""
        wait = min(most, self.alarm.wait_at_most(time.monotonic()))
        return self.alarm.rang(self.poll.ready(wait))

    def looks_within(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.turn(deadline - time.monotonic()):
                return True
        return False

    def close(self) -> None:
        self.feed.close()
        self.store.close()
        self.doorbell.close()


@pytest.fixture(params=["inotify", "poll"])
def dispatcher(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Dispatcher]:
    if request.param == "inotify" and not inotify_available():
        pytest.skip("inotify is Linux only")
    db = tmp_path / "q.db"
    open_store(db).close()
    idle = Dispatcher(db, request.param)
    assert idle.feed.mode == request.param
    idle.looks_within(QUIET)  # whatever its first look heard
    try:
        yield idle
    finally:
        idle.close()


def test_an_enqueue_wakes_a_listening_dispatcher(dispatcher: Dispatcher, tmp_path: Path) -> None:
    dispatcher.alarm.listen(True)
    dispatcher.alarm.exchanged(dispatcher.store, False, now_ms())
    assert not dispatcher.looks_within(QUIET)
    with open_store(tmp_path / "q.db") as producer:
        producer.enqueue(JobSpec("now", "true"), 3, now_ms())
    assert dispatcher.looks_within(10), "no look for the job enqueued"
    assert not dispatcher.looks_within(QUIET)  # told once


def test_a_busy_dispatcher_is_not_woken_and_finds_the_ring_when_it_listens(
    dispatcher: Dispatcher, tmp_path: Path
) -> None:
    assert not dispatcher.alarm.listening
    with open_store(tmp_path / "q.db") as producer:
        producer.enqueue(JobSpec("now", "true"), 3, now_ms())
    assert not dispatcher.looks_within(QUIET * 2)  # drained now and then, not acted on
    assert dispatcher.poll.watched == {dispatcher.doorbell.fileno()}
    with open_store(tmp_path / "q.db") as producer:
        producer.enqueue(JobSpec("second", "true"), 3, now_ms())
    # The next exchange (not here) claims what came meanwhile; from then on rings count.
    dispatcher.alarm.listen(True)
    assert dispatcher.looks_within(10), "the ring heard while busy was lost"


def test_the_dispatchers_own_claims_and_results_are_not_news(
    dispatcher: Dispatcher, tmp_path: Path
) -> None:
    with open_store(tmp_path / "q.db") as producer:
        register(producer, "w1")
        producer.enqueue(JobSpec("job", "true"), 3, now_ms())
    dispatcher.alarm.listen(True)
    assert dispatcher.looks_within(10)
    # Claimed and completed by the dispatcher's own store: no ring, and the feed's look at
    # data_version (on the same connection) does not count them either.
    settle(dispatcher.store, claim(dispatcher.store, now=now_ms()), now=now_ms())
    dispatcher.alarm.exchanged(dispatcher.store, False, now_ms())
    assert not dispatcher.looks_within(0.8)  # past the feed's look every half second


def test_a_job_for_later_wakes_it_when_due(dispatcher: Dispatcher, tmp_path: Path) -> None:
    dispatcher.alarm.listen(True)
    dispatcher.alarm.exchanged(dispatcher.store, False, now_ms())
    due = now_ms() + 1_000
    with open_store(tmp_path / "q.db") as producer:
        producer.enqueue(JobSpec("later", "true", run_at=due), 3, now_ms())
    assert dispatcher.looks_within(10)  # the enqueue rang: the exchange finds nothing due
    dispatcher.alarm.exchanged(dispatcher.store, False, now_ms())
    assert dispatcher.alarm.wait_at_most(time.monotonic()) <= 1.0
    wait_until(lambda: dispatcher.turn(0.05), timeout=10, what="the look at the job's run_at")
    assert now_ms() >= due


@pytest.fixture
def feedless(tmp_path: Path) -> Iterator[tuple[WorkAlarm, Store]]:
    """An alarm with no feed (one that cannot listen): only the next run_at wakes it."""
    store, doorbell = open_store(tmp_path / "q.db"), Doorbell()
    try:
        yield WorkAlarm(doorbell, None, store.now, Poll()), store
    finally:
        store.close()
        doorbell.close()


def test_an_exchange_that_made_work_has_the_next_run_at_read_again(
    feedless: tuple[WorkAlarm, Store], tmp_path: Path
) -> None:
    alarm, store = feedless
    store.enqueue(JobSpec("later", "true", run_at=now_ms() + 3_600_000), 3, now_ms())
    alarm.listen(True)
    alarm.exchanged(store, False, now_ms())
    assert alarm.wait_at_most(time.monotonic()) > 3_000
    # As a retry scheduled by an exchange: it comes sooner than anything known.
    with sqlite_file(tmp_path / "q.db", writable=True) as conn:
        conn.execute("UPDATE jobs SET run_at = ?", (now_ms() + 400,))
    alarm.exchanged(store, False, now_ms())  # nothing says it changed: not read again
    assert alarm.wait_at_most(time.monotonic()) > 3_000
    alarm.exchanged(store, True, now_ms())
    assert alarm.wait_at_most(time.monotonic()) <= 0.4
    wait_until(lambda: alarm.rang([]), timeout=10, what="the look at the new run_at")


def test_work_made_while_every_worker_was_busy_is_read_when_one_idles(
    feedless: tuple[WorkAlarm, Store],
) -> None:
    alarm, store = feedless
    alarm.listen(True)
    alarm.exchanged(store, False, now_ms())  # nothing waits
    alarm.listen(False)  # every worker busy
    store.enqueue(JobSpec("retry", "true", run_at=now_ms() + 3_600_000), 3, now_ms())
    alarm.exchanged(store, True, now_ms())  # as a retry scheduled meanwhile
    alarm.listen(True)
    alarm.exchanged(store, False, now_ms())
    assert alarm.wait_at_most(time.monotonic()) < 3_700


def test_a_job_due_since_the_exchange_claimed_is_looked_for_at_once(
    feedless: tuple[WorkAlarm, Store],
) -> None:
    # The exchange claimed at `asked`; the job fell due while its commands started.
    alarm, store = feedless
    asked = now_ms()
    store.enqueue(JobSpec("soon", "true", run_at=asked + 20), 3, now_ms())
    wait_until(lambda: now_ms() > asked + 40, what="the job to fall due")
    alarm.listen(True)
    alarm.exchanged(store, False, asked)
    assert alarm.wait_at_most(time.monotonic()) == 0
    assert alarm.rang([])


def test_the_doorbell_wakes_it_even_when_busy(dispatcher: Dispatcher) -> None:
    dispatcher.doorbell.ring()
    assert dispatcher.looks_within(10)
    assert not dispatcher.looks_within(QUIET)


class Reconnecting(ChangeFeed):
    """A feed that connects again on every drain, on a new descriptor (as PostgreSQL's does
    after its connection dropped)."""

    mode = "listen"

    def __init__(self) -> None:
        self._read, self._write = os.pipe()

    def fileno(self) -> int | None:
        return self._read

    def wait_at_most(self) -> float:
        return 1.0

    def drain(self) -> bool:
        again = os.pipe()  # connected again before the old connection is closed
        os.close(self._read)
        os.close(self._write)
        self._read, self._write = again
        return True

    def ring(self) -> None:
        os.write(self._write, b"!")

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)


def test_a_feed_that_connects_again_is_watched_on_its_new_descriptor() -> None:
    feed, doorbell, poll = Reconnecting(), Doorbell(), Poll()
    try:
        alarm = WorkAlarm(doorbell, feed, now_ms, poll)
        alarm.listen(True)
        before = feed.fileno()
        assert poll.watched == {before}
        feed.ring()
        assert alarm.rang(poll.ready(10))
        assert poll.watched == {feed.fileno()} != {before}  # the old number let go at once
        feed.ring()
        assert alarm.rang(poll.ready(10)), "the new descriptor is not watched"
        alarm.listen(False)
        assert poll.watched == set()
    finally:
        feed.close()
        doorbell.close()
