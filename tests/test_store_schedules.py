"""The store contract of schedules, on every backend: adding, pausing and removing them, firing
a tick as one compare-and-set with its job (two stores or many threads racing for a tick make
exactly one job), running one now, and keeping the config file's schedules in step."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from store_helpers import NOW

from queuectl_tui.models import JobState, local_operator
from queuectl_tui.schedules import (
    Schedule,
    ScheduleSpec,
    new_schedule,
    parse_schedule,
    tick_job,
)
from queuectl_tui.store import DuplicateScheduleError, Store, open_store

from helpers import backend_location, spec

MINUTE = 60_000
ACTION = local_operator("cli").action("schedule-add", "test")


def every_minute(**fields: object) -> ScheduleSpec:
    return parse_schedule({"every": "1m", "command": "echo tick", **fields})


def add(store: Store, name: str = "tick", now: int = NOW, **fields: object) -> Schedule:
    schedule = new_schedule(name, every_minute(**fields), "cli", now)
    store.add_schedule(schedule, ACTION)
    return schedule


def fire_next(store: Store, name: str = "tick", now: int | None = None) -> list | None:
    """Fire the schedule's next tick as a pool would at `now` (default: that tick)."""
    schedule = store.get_schedule(name)
    assert schedule is not None and schedule.next_at is not None
    tick = schedule.next_at
    job = tick_job(name, schedule.spec, tick)
    return store.fire_schedule(name, tick, tick + MINUTE, [job], 3, now or tick)


def test_a_schedule_is_stored_as_added(store: Store) -> None:
    added = add(store, queue="reports", priority=4)
    assert store.get_schedule("tick") == added
    assert store.schedules() == [added]
    assert added.next_at == (NOW // MINUTE + 1) * MINUTE and not added.paused
    assert store.get_schedule("other") is None
    assert store.actions()[0].action == "schedule-add"


def test_a_taken_name_is_refused_and_the_first_kept(store: Store) -> None:
    first = add(store)
    with pytest.raises(DuplicateScheduleError):
        add(store, command="echo other")
    assert store.schedules() == [first]


def test_a_fired_tick_makes_one_ordinary_job_and_moves_on(store: Store) -> None:
    add(store, queue="reports", priority=4)
    tick = store.get_schedule("tick").next_at
    made = fire_next(store)
    assert [job.id for job in made] == [f"tick@{_compact(tick)}"]
    job = store.get(made[0].id)
    assert (job.state, job.queue, job.priority, job.run_at) == (
        JobState.PENDING,
        "reports",
        4,
        tick,
    )
    assert job.idempotency_key == job.id
    after = store.get_schedule("tick")
    assert (after.next_at, after.last_job_id, after.last_fired_at) == (tick + MINUTE, job.id, tick)
    assert store.counts("reports")[JobState.PENDING] == 1  # the per-queue counters too
    assert store.queue_counts().by_state[JobState.PENDING] == 1


def test_a_stale_tick_changes_nothing(store: Store) -> None:
    add(store)
    tick = store.get_schedule("tick").next_at
    job = tick_job("tick", store.get_schedule("tick").spec, tick)
    assert store.fire_schedule("tick", tick, tick + MINUTE, [job], 3, tick) is not None
    # A second pool that read the schedule before the first fired: its compare-and-set fails.
    assert store.fire_schedule("tick", tick, tick + MINUTE, [job], 3, tick) is None
    assert store.counts()[JobState.PENDING] == 1
    assert store.get_schedule("tick").next_at == tick + MINUTE


def test_a_tick_whose_job_exists_makes_none(store: Store) -> None:
    """The key is unique per schedule and tick: a schedule fired again from a tick it fired
    before (removed and added back) finds the job, and makes no second one."""
    add(store)
    tick = store.get_schedule("tick").next_at
    fire_next(store)
    store.remove_schedule("tick", NOW, None)
    add(store, now=tick - 1)
    assert fire_next(store) == []
    assert store.counts()[JobState.PENDING] == 1


def test_a_job_of_another_making_with_the_tick_s_id_is_left_alone(store: Store) -> None:
    add(store)
    tick = store.get_schedule("tick").next_at
    store.enqueue(spec(id=f"tick@{_compact(tick)}", command="mine"), 3, NOW)
    assert fire_next(store) == []
    assert store.get(f"tick@{_compact(tick)}").command == "mine"
    assert store.get_schedule("tick").next_at == tick + MINUTE


def test_a_paused_schedule_is_not_fired_and_resumes_from_a_new_tick(store: Store) -> None:
    add(store)
    tick = store.get_schedule("tick").next_at
    assert store.set_schedule_paused("tick", True, None, NOW, None)
    assert store.get_schedule("tick").paused
    assert fire_next(store) is None
    later = tick + 10 * MINUTE
    assert store.set_schedule_paused("tick", False, later, NOW, None)
    resumed = store.get_schedule("tick")
    assert not resumed.paused and resumed.next_at == later
    assert not store.set_schedule_paused("nothing", True, None, NOW, None)
    assert store.counts()[JobState.PENDING] == 0


def test_remove(store: Store) -> None:
    add(store)
    fire_next(store)
    assert store.remove_schedule("tick", NOW, None)
    assert not store.remove_schedule("tick", NOW, None)
    assert store.schedules() == [] and store.counts()[JobState.PENDING] == 1  # its job stays


def test_run_now_makes_one_job_outside_the_ticks(store: Store) -> None:
    added = add(store)
    job_spec = added.spec.job._replace(id="tick@run-1", idempotency_key="tick@run-1")
    job = store.run_schedule("tick", job_spec, 3, NOW + 5, None)
    assert job is not None and job.id == "tick@run-1" and job.state is JobState.PENDING
    after = store.get_schedule("tick")
    assert after.next_at == added.next_at  # the ticks go on as before
    assert (after.last_job_id, after.last_fired_at) == ("tick@run-1", NOW + 5)
    assert store.run_schedule("nothing", job_spec._replace(id="x"), 3, NOW, None) is None


def test_config_sync_adds_keeps_changes_and_removes(store: Store) -> None:
    mine = add(store, "by-hand")
    declared = [
        new_schedule("a", every_minute(), "config", NOW),
        new_schedule("b", every_minute(), "config", NOW),
        new_schedule("by-hand", every_minute(queue="q"), "config", NOW),
    ]
    done = store.sync_schedules(declared, NOW, ACTION)
    assert (done.added, done.changed, done.removed) == (["a", "b"], [], [])
    assert done.conflicts == ["by-hand"] and store.get_schedule("by-hand") == mine
    fire_next(store, "a")
    a_next = store.get_schedule("a").next_at
    later = NOW + 30 * MINUTE
    again = [
        new_schedule("a", every_minute(), "config", later),  # unchanged: keeps its next tick
        new_schedule("c", every_minute(queue="c"), "config", later),
    ]
    done = store.sync_schedules(again, later, ACTION)
    assert (done.added, done.changed, done.removed) == (["c"], [], ["b"])
    assert store.get_schedule("a").next_at == a_next
    changed = [new_schedule("a", every_minute(priority=9), "config", later)]
    done = store.sync_schedules(changed, later, ACTION)
    assert (done.changed, done.removed) == (["a"], ["c"])
    assert store.get_schedule("a").next_at == changed[0].next_at
    assert store.get_schedule("a").spec.job.priority == 9
    assert [s.name for s in store.schedules()] == ["a", "by-hand"]


def test_two_stores_racing_for_a_tick_make_one_job(backend: str, tmp_path: Path) -> None:
    location = backend_location(backend, tmp_path)
    first, second = open_store(location), open_store(location)
    try:
        add(first)
        seen = [store.get_schedule("tick") for store in (first, second)]  # both read it
        results = []
        for store, schedule in zip((first, second), seen, strict=True):
            tick = schedule.next_at
            job = tick_job("tick", schedule.spec, tick)
            results.append(store.fire_schedule("tick", tick, tick + MINUTE, [job], 3, tick))
        assert [r is not None for r in results] == [True, False]
        assert second.counts()[JobState.PENDING] == 1
    finally:
        first.close()
        second.close()


def test_threads_racing_for_each_tick_make_one_job_per_tick(backend: str, tmp_path: Path) -> None:
    location = backend_location(backend, tmp_path)
    setup = open_store(location)
    add(setup)
    first_tick = setup.get_schedule("tick").next_at
    ticks = 5
    barrier = threading.Barrier(4)
    made: list[str] = []
    errors: list[BaseException] = []

    def racer() -> None:
        store = open_store(location)
        try:
            for _ in range(ticks):
                barrier.wait(timeout=30)
                schedule = store.get_schedule("tick")
                barrier.wait(timeout=30)  # every thread read the same tick before any fires
                tick = schedule.next_at
                job = tick_job("tick", schedule.spec, tick)
                fired = store.fire_schedule("tick", tick, tick + MINUTE, [job], 3, tick)
                made.extend(job.id for job in fired or [])
        except BaseException as error:
            errors.append(error)
            barrier.abort()
        finally:
            store.close()

    threads = [threading.Thread(target=racer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    try:
        assert not errors, errors
        expected = [f"tick@{_compact(first_tick + n * MINUTE)}" for n in range(ticks)]
        assert sorted(made) == expected
        assert setup.counts()[JobState.PENDING] == ticks
    finally:
        setup.close()


def _compact(tick: int) -> str:
    from queuectl_tui.schedules import compact_utc

    return compact_utc(tick)
