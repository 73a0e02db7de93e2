"""The store's change feed: a waiting thread learns of any connection's commit."""

from __future__ import annotations

import contextlib
import select
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import claim, register, settle, settle_and_claim, sqlite_file

from queuectl_tui.models import Action, JobState, Outcome, OutputChunk, Stream
from queuectl_tui.store import ChangeFeed, OutputAppend, Store, open_store
from queuectl_tui.store.sqlite.changes import inotify_available

from helpers import spec

NOW = 1_700_000_000_000


@pytest.mark.parametrize("mode", ["inotify", "poll"])
def test_a_commit_by_another_connection_is_fed_once(tmp_path: Path, mode: str) -> None:
    if mode == "inotify" and not inotify_available():
        pytest.skip("inotify is Linux only")
    db = tmp_path / "q.db"
    with open_store(db) as reader, open_store(db) as writer:
        feed = reader.change_feed(mode)
        try:
            assert feed.mode == mode
            assert (feed.fileno() is None) == (mode == "poll")
            assert not feed.drain()  # nothing yet
            writer.enqueue(spec(id="a"), 3, NOW)
            if feed.fileno() is not None:
                ready, _, _ = select.select([feed.fileno()], [], [], 10)
                assert ready, "the feed's descriptor did not become readable"
            assert feed.drain()
            assert not feed.drain()  # told once
            assert feed.wait_at_most() > 0
        finally:
            feed.close()


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path / "q.db") as store, pytest.raises(ValueError, match="wake mode"):
        store.change_feed("telepathy")


needs_inotify = pytest.mark.skipif(not inotify_available(), reason="inotify is Linux only")


@contextlib.contextmanager
def _pool_feed(reader: Store) -> Iterator[ChangeFeed]:
    """A pool's feed (commits that may give work, by inotify), with what came before it
    drained."""
    feed = reader.change_feed("inotify", work_only=True)
    try:
        feed.drain()
        yield feed
    finally:
        feed.close()


def _readable(feed: ChangeFeed, wait: float) -> bool:
    descriptor = feed.fileno()
    assert descriptor is not None
    ready, _, _ = select.select([descriptor], [], [], wait)
    return bool(ready)


QUIET = 0.3  # how long a feed is watched for a wake it must not have


@needs_inotify
def test_a_pools_feed_sleeps_through_claims_results_and_heartbeats(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with open_store(db) as pool, open_store(db) as producer, open_store(db) as reader:
        register(pool, "w1", now=NOW)
        producer.enqueue(spec(id="a"), 3, NOW)
        with _pool_feed(reader) as feed:
            job = claim(pool, "w1", NOW + 1)
            assert job is not None
            _, nothing = settle_and_claim(pool, job, NOW + 2)
            assert nothing is None
            pool.heartbeat(["w1"], NOW + 3)
            assert not _readable(feed, QUIET)  # nobody was given work
            producer.enqueue(spec(id="b"), 3, NOW + 4)
            assert _readable(feed, 10)
            assert feed.drain()
            assert not feed.drain()


@needs_inotify
def test_a_result_that_leaves_work_wakes_the_pools(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with open_store(db) as pool, open_store(db) as producer, open_store(db) as reader:
        producer.enqueue(spec(id="flaky", max_retries=2), 3, NOW)
        with _pool_feed(reader) as feed:
            job = claim(pool, "w1", NOW + 1)
            assert job is not None
            while _readable(feed, 0):  # the registration of w1 (a worker row: it may ring)
                feed.drain()
            result = settle(pool, job, Outcome.FAILED, NOW + 2, exit_code=1, error="exit code 1")
            assert result.state is JobState.FAILED  # a retry, later: another pool must know
            assert _readable(feed, 10)
            assert feed.drain()


@needs_inotify
def test_a_writer_that_rings_no_bell_is_seen_by_the_safety_poll(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with open_store(db) as producer, open_store(db) as reader:
        producer.enqueue(spec(id="a"), 3, NOW)
        with _pool_feed(reader) as feed:
            with sqlite_file(db, writable=True) as conn:  # the sqlite3 shell, say
                conn.execute("UPDATE jobs SET priority = 5")
            assert not _readable(feed, QUIET)
            assert 0 < feed.wait_at_most() <= 1
            assert feed.drain()  # what the pool's dispatcher does when the wait runs out


@needs_inotify
def test_a_run_that_ends_in_a_limited_queue_wakes_the_pools(tmp_path: Path) -> None:
    # A pool serving only "reports" waits while the queue's one slot is taken by another
    # pool's run; when that run ends, the slot is free for it.
    db = tmp_path / "q.db"
    with open_store(db) as pool, open_store(db) as producer, open_store(db) as reader:
        producer.set_queue_limit("reports", 1, NOW, Action("cli", "t", "h", "limit", "reports"))
        for name in ("r1", "r2"):
            producer.enqueue(spec(id=name, queue="reports"), 3, NOW)
        job = claim(pool, "w1", NOW + 1)
        assert job is not None and job.queue == "reports"
        assert not reader.has_due_work(NOW + 2, ["reports"])  # at its limit
        with _pool_feed(reader) as feed:
            settle(pool, job, Outcome.COMPLETED, NOW + 2)  # a result, nobody claiming
            assert _readable(feed, 10)
            assert feed.drain()
            assert reader.has_due_work(NOW + 3, ["reports"])


@needs_inotify
def test_live_output_wakes_no_pool(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with open_store(db) as pool, open_store(db) as producer, open_store(db) as reader:
        producer.enqueue(spec(id="talky"), 3, NOW)
        job = claim(pool, "w1", NOW + 1)
        assert job is not None
        with _pool_feed(reader) as feed:
            chunk = OutputChunk(0, Stream.STDOUT, "hello\n", NOW + 2, 0)
            pool.append_output([OutputAppend(job.id, job.runs, "w1", [chunk], 0)])
            assert not _readable(feed, QUIET)


@needs_inotify
def test_a_lock_file_made_again_is_listened_to(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with open_store(db) as producer, open_store(db) as reader:
        producer.enqueue(spec(id="a"), 3, NOW)
        with _pool_feed(reader) as feed:
            Path(f"{db}-lock").unlink()  # the reader's store still holds the old one
            with open_store(db) as newcomer:  # makes a new lock file, and rings it
                newcomer.enqueue(spec(id="b"), 3, NOW)
                assert feed.drain()  # data_version, at the safety poll; and the new file
                newcomer.enqueue(spec(id="c"), 3, NOW)
                assert _readable(feed, 10), "the new lock file's ring was not heard"
                assert feed.drain()
