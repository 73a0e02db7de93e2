"""A schedule firing into a busy pool: an `@every 1s` schedule whose jobs (priority 10) go
ahead of a backlog of 'sleep 0.05' jobs that keeps every worker busy for the whole run.

Reported: how late each tick's job was claimed (its claim minus its tick, both on the store's
clock: the ticker's wake-up, the firing transaction and the wait for a free worker), from the
second tick on (the pool's ticker sees a schedule added while it runs within a second, so the
first tick may be that late; the max includes it), and that the run made exactly one job per
tick (ids consecutive, none twice)."""

from __future__ import annotations

import statistics
import time

from ..models import JobSpec, JobState
from ..schedules import new_schedule, parse_schedule
from ..store import Store, open_store
from .places import Places
from .pool_process import PoolProcess
from .scenarios import Measure

BACKLOG_COMMAND = "sleep 0.05"
BACKLOG_SECONDS = 0.05
NAME = "tick"


def measure(places: Places, workers: int, seconds: float) -> list[Measure]:
    database = places.location("schedule")
    with open_store(database) as store:
        # More backlog than the pool drains in the run: every worker stays busy throughout.
        backlog = int(workers * (seconds + 10) / BACKLOG_SECONDS)
        specs = [JobSpec(f"backlog-{n}", BACKLOG_COMMAND) for n in range(backlog)]
        store.enqueue_many(specs, 0, store.now())
    pool = PoolProcess(database, workers, places.folder / "schedule.log")
    with pool, open_store(database) as store:
        spec = parse_schedule({"every": "1s", "command": "true", "priority": 10})
        store.add_schedule(new_schedule(NAME, spec, "cli", store.now()), None)
        time.sleep(seconds)
        store.set_schedule_paused(NAME, True, None, store.now(), None)
        ticks = _tick_jobs(store)
        _wait_claimed(store, [job_id for job_id, _, _ in ticks])
        ticks = _tick_jobs(store)
        drained = store.counts()[JobState.COMPLETED]
    if not ticks:
        raise RuntimeError("the schedule made no job")
    late_all = [float(claimed - tick) for _, tick, claimed in ticks if claimed is not None]
    late = sorted(late_all[1:] or late_all)
    made = [tick for _, tick, _ in ticks]
    expected = (made[-1] - made[0]) // 1000 + 1
    missing = expected - len(set(made))
    extra = len(made) - len(set(made))
    details: dict[str, float | int | str] = {
        "ticks": expected,
        "jobs": len(made),
        "missing": missing,
        "duplicates": extra,
        "backlog_jobs_done": drained,
        "workers": workers,
    }
    return [
        Measure(
            "schedule tick to claim p50 (busy pool)",
            statistics.median(late),
            "ms",
            target="<= 100 ms (a job of 50 ms frees a worker)",
            details=details,
        ),
        Measure(
            "schedule tick to claim p95", late[min(len(late) - 1, int(0.95 * len(late)))], "ms"
        ),
        Measure("schedule tick to claim max (first tick included)", max(late_all), "ms"),
        Measure(
            "schedule jobs per tick",
            len(made) / expected,
            "jobs",
            target="exactly 1",
            details={"missing": missing, "duplicates": extra},
        ),
    ]


def _tick_jobs(store: Store) -> list[tuple[str, int, int | None]]:
    """(id, tick, claimed_at) of every job the schedule made, in tick order."""
    found = [
        (job.id, job.run_at, job.claimed_at)
        for state in (JobState.PENDING, JobState.PROCESSING, JobState.COMPLETED)
        for job in store.list_jobs(state, limit=100_000)
        if job.id.startswith(f"{NAME}@")
    ]
    return sorted(found, key=lambda row: row[1])


def _wait_claimed(store: Store, ids: list[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while any((job := store.get(job_id)) is not None and job.claimed_at is None for job_id in ids):
        if time.monotonic() > deadline:
            raise RuntimeError("the schedule's jobs were not claimed within a minute")
        time.sleep(0.05)
