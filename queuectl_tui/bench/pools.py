"""Pools side by side on one queue: the jobs/s of 1, 2 and 4 pools of the same size, started
idle, sharing one bulk load of trivial jobs. Each count is measured in every round, the
counts alternating, and compared with one pool in the same round."""

from __future__ import annotations

import statistics
import time
from contextlib import ExitStack

from ..models import JobSpec, JobState
from ..store import open_store
from .places import Places
from .pool_process import PoolProcess
from .scenarios import Measure, wait_for_completion

POOL_COUNTS = (1, 2, 4)


def measure(places: Places, jobs: int, workers: int, rounds: int) -> list[Measure]:
    rates: dict[int, list[float]] = {count: [] for count in POOL_COUNTS}
    for round_number in range(rounds):
        order = POOL_COUNTS if round_number % 2 == 0 else tuple(reversed(POOL_COUNTS))
        for count in order:
            rates[count].append(_rate(places, count, jobs, workers, round_number))
    one = statistics.median(rates[1])
    return [
        Measure(
            f"{count} pool{'s' if count > 1 else ''} of {workers} workers on one queue, "
            f"'true' x {jobs}",
            statistics.median(rates[count]),
            "jobs/s",
            baseline=one,
            details={"rounds_values": ",".join(f"{rate:.0f}" for rate in rates[count])},
        )
        for count in POOL_COUNTS
    ]


def _rate(places: Places, pools: int, jobs: int, workers: int, round_number: int) -> float:
    """Jobs/s from the enqueue commit to the last finish, with `pools` pools running."""
    location = places.location(f"pools_{pools}_{round_number}")
    open_store(location).close()
    with ExitStack() as running, open_store(location) as store:
        for number in range(pools):
            log = places.folder / f"pools-{pools}-{round_number}-{number}.log"
            running.enter_context(PoolProcess(location, workers, log))
        time.sleep(0.5)  # every pool idle, waiting for work
        enqueued_at = store.now()
        store.enqueue_many(
            [JobSpec(f"pools-{n}", "true", 0, None, 0) for n in range(jobs)], 0, enqueued_at
        )
        wait_for_completion(store, jobs, timeout=max(120.0, jobs / 10))
        finished = [
            job.finished_at or 0
            for job in store.list_jobs(JobState.COMPLETED, limit=jobs, newest_first=True)
        ]
    return jobs / max(0.001, (max(finished) - enqueued_at) / 1000)
