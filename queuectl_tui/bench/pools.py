"""Pools side by side on one queue: the jobs/s of 1, 2 and 4 pools of the same size, started
idle, sharing one bulk load of trivial jobs. Each count is measured in every round, the
counts alternating, and compared with one pool in the same round."""

from __future__ import annotations

import statistics
import time
from contextlib import ExitStack

from ..store import open_store
from .places import Places
from .pool_process import PoolProcess
from .scenarios import Measure, bulk_loaded_rate

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
        return bulk_loaded_rate(store, "pools-", jobs, done_before=0)
