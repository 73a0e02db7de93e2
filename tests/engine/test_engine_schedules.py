"""Schedules fired by running pools: the ticker keeps the config file's schedules in step as
it starts, and two pool processes on one database make exactly one job per tick of an
`@every 1s` schedule, on every backend."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from engine_helpers import Queue

from queuectl_tui.config import Settings, parse_schedules
from queuectl_tui.engine.ticker import ScheduleTicker
from queuectl_tui.models import JobState
from queuectl_tui.schedules import compact_utc, new_schedule, parse_schedule
from queuectl_tui.store import Store, open_store

from helpers import wait_until


def _ticker(database: str, schedules: dict[str, Any] | None) -> ScheduleTicker:
    declared = None if schedules is None else parse_schedules(schedules)
    settings = replace(Settings(), database=database, schedules=declared)
    return ScheduleTicker(lambda: open_store(database), settings)


def _run_until(ticker: ScheduleTicker, done: Callable[[], object], timeout: float = 20.0) -> None:
    ticker.start()
    try:
        wait_until(done, timeout, what="the ticker")
    finally:
        ticker.stop()
        ticker.join(timeout=10)


def test_the_config_file_s_schedules_are_kept_in_step(database: str) -> None:
    with open_store(database) as store:
        by_hand = parse_schedule({"every": "1h", "command": "mine"})
        store.add_schedule(new_schedule("by-hand", by_hand, "cli", store.now()), None)
        first = {
            "a": {"every": "1h", "command": "echo a"},
            "b": {"cron": "0 2 * * *", "timezone": "Europe/Berlin", "command": "echo b"},
            "by-hand": {"every": "1m", "command": "theirs"},
        }
        _run_until(_ticker(database, first), lambda: store.get_schedule("b") is not None)
        assert [s.name for s in store.schedules()] == ["a", "b", "by-hand"]
        assert store.get_schedule("by-hand").spec.job.command == "mine"  # left alone
        assert store.get_schedule("a").origin == "config"
        a_next = store.get_schedule("a").next_at
        second = {"a": first["a"], "c": {"every": "1h", "command": "echo c", "queue": "c"}}
        _run_until(_ticker(database, second), lambda: store.get_schedule("b") is None)
        assert [s.name for s in store.schedules()] == ["a", "by-hand", "c"]
        assert store.get_schedule("a").next_at == a_next  # unchanged: its tick kept
        # A file without "schedules" leaves the stored ones alone.
        ticker = _ticker(database, None)
        _run_until(ticker, lambda: True)
        assert [s.name for s in store.schedules()] == ["a", "by-hand", "c"]
        entry = store.actions()[0]
        assert (entry.face, entry.action) == ("config", "schedule-sync")


def test_the_ticker_fires_each_tick_once(database: str) -> None:
    with open_store(database) as store:
        spec = parse_schedule({"every": "1s", "command": "true", "queue": "ticks"})
        store.add_schedule(new_schedule("tick", spec, "cli", store.now()), None)
        ticker = _ticker(database, None)
        _run_until(ticker, lambda: store.counts("ticks")[JobState.PENDING] >= 3)
        ids = _tick_ids(store, "tick@")
        assert len(ids) == len(set(ids)) == ticker.fired
        _assert_consecutive_seconds(ids, "tick@")


def test_a_paused_schedule_makes_no_job(database: str) -> None:
    with open_store(database) as store:
        spec = parse_schedule({"every": "1s", "command": "true"})
        store.add_schedule(new_schedule("tick", spec, "cli", store.now()), None)
        store.set_schedule_paused("tick", True, None, store.now(), None)
        ticker = _ticker(database, None)
        ticker.start()
        time.sleep(2.5)
        ticker.stop()
        ticker.join(timeout=10)
        assert ticker.fired == 0 and sum(store.counts().values()) == 0


@pytest.mark.slow
def test_two_pools_make_exactly_one_job_per_tick(queue: Queue) -> None:
    queue.cli("schedule", "add", "tick", "--every", "1s", "--command", "true")
    first, second = queue.start_pool(2), queue.start_pool(2)
    time.sleep(10)
    for pool in (first, second):
        pool.signal(signal.SIGINT)
    for pool in (first, second):
        assert pool.wait(timeout=30) == 0
    with queue.store() as store:
        ids = _tick_ids(store, "tick@")
        assert len(ids) >= 5, ids
        assert len(ids) == len(set(ids))
        _assert_consecutive_seconds(ids, "tick@")
        assert all(store.get(job_id).queue == "default" for job_id in ids)
    # Each tick was made by one pool: their "schedule fired" lines name every job once.
    made = Counter(
        job_id
        for pool in (first, second)
        for record in pool.events("schedule fired")
        for job_id in (record.get("jobs") or "").split(",")
        if job_id
    )
    assert sorted(made) == ids and set(made.values()) == {1}


def _tick_ids(store: Store, prefix: str) -> list[str]:
    jobs = store.list_jobs(limit=10_000)
    return sorted(job.id for job in jobs if job.id.startswith(prefix))


def _assert_consecutive_seconds(ids: list[str], prefix: str) -> None:
    from queuectl_tui.timeutil import parse_iso

    def tick(job_id: str) -> int:
        text = job_id.removeprefix(prefix)  # 20261206T020000Z
        iso = f"{text[:4]}-{text[4:6]}-{text[6:8]}T{text[9:11]}:{text[11:13]}:{text[13:15]}Z"
        return parse_iso(iso)

    ticks = [tick(job_id) for job_id in ids]
    assert ticks == list(range(ticks[0], ticks[-1] + 1000, 1000)), ids
    assert [compact_utc(t) for t in ticks] == [i.removeprefix(prefix) for i in ids]
