"""The cost of one console refresh on a large queue, and the console's memory.

    python scripts/measure_console.py /tmp/big.db            # seeds 1,000,000 jobs if empty
    python scripts/measure_console.py /tmp/big.db --jobs 200000

Seeds the database (jobs, plus 30,000 attempts spread over the last 15 minutes so that the
per-minute rates have something to count), then times the background read of each view, the
UI-thread update of a page, and the once-a-second tick, and prints the process's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time
from collections.abc import Callable

from queuectl_tui.config import Settings
from queuectl_tui.lifecycle import RetryPolicy
from queuectl_tui.models import JobSpec, JobState, Outcome, Worker, WorkerStatus
from queuectl_tui.store import Settlement, SQLiteStore
from queuectl_tui.timeutil import now_ms
from queuectl_tui.tui.app import QueueConsole
from queuectl_tui.tui.data import Pane, ViewRequest, read_snapshot

ATTEMPTS = 30_000


def seed(store: SQLiteStore, jobs: int) -> None:
    started = time.perf_counter()
    for start in range(0, jobs, 100_000):
        numbers = range(start, min(jobs, start + 100_000))
        batch = [JobSpec(f"job-{n:07d}", f"echo job {n}") for n in numbers]
        store.enqueue_many(batch, 3, now_ms())
    finished_at = now_ms() - 14 * 60_000
    moment = now_ms()
    store.register_workers(
        [
            Worker(
                "seed-worker",
                "seed",
                1,
                "seed",
                WorkerStatus.IDLE,
                moment,
                moment,
                None,
                None,
                0,
                0,
            )
        ]
    )
    for number in range(min(ATTEMPTS, jobs)):
        job = store.claim("seed-worker", 1, now_ms())
        if job is None:
            break
        ok = number % 10 != 0
        outcome = Outcome.COMPLETED if ok else Outcome.FAILED
        error = None if ok else "exit code 1"
        store.settle(
            Settlement(job, outcome, 0 if ok else 1, "out\n", error, finished_at),
            RetryPolicy(2, 3600),
        )
        finished_at += 28
    print(f"seeded {jobs:,} jobs in {time.perf_counter() - started:.1f} s")


def timed(call: Callable[[], object], repeat: int = 30) -> str:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return f"median {statistics.median(samples):.2f} ms, max {max(samples):.2f} ms"


async def measure_ui(path: str, store: SQLiteStore) -> None:
    app = QueueConsole(Settings(database=path))
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(20):
            await pilot.pause(0.05)
            await app.workers.wait_for_complete()
        snapshot = read_snapshot(store, app.view_request(), now_ms(), store.change_token())
        print(f"UI update of a 100-row page: {timed(lambda: app.apply(snapshot))}")
        print(f"UI tick (ages and countdowns, no read): {timed(app.tick)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    args = parser.parse_args()
    store = SQLiteStore(args.database)
    if sum(store.counts().values()) == 0:
        seed(store, args.jobs)
    print("jobs:", {state.value: count for state, count in store.counts().items()})
    print(f"nothing changed (change token only): {timed(store.change_token, 200)}")
    views = {
        "jobs, all, first page": ViewRequest(Pane.JOBS),
        "jobs, pending": ViewRequest(Pane.JOBS, JobState.PENDING),
        "jobs, completed": ViewRequest(Pane.JOBS, JobState.COMPLETED),
        "jobs, a page deep in the middle": ViewRequest(Pane.JOBS, anchor=500_000),
        "dead letters": ViewRequest(Pane.DEAD),
        "workers": ViewRequest(Pane.WORKERS),
    }
    for name, request in views.items():

        def read(with_rates: bool, request: ViewRequest = request) -> Callable[[], object]:
            return lambda: read_snapshot(store, request, now_ms(), 0, with_rates)

        plain = timed(read(False))
        rates = timed(read(True), 10)
        print(f"read {name}: {plain}; with per-minute rates (every 5 s): {rates}")
    asyncio.run(measure_ui(args.database, store))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process (store, console and a 100-row page): {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
