"""Build a queue with a long history of finished attempts and time `stats` on it.

    python scripts/measure_stats.py /tmp/history.db [--jobs 1000000]

The history is written with SQL directly (see queuectl_tui/bench/history.py). Prints the
median and range of seven calls of the store's stats() and of the console's per-minute
rates."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from queuectl_tui.bench.history import complete_all, enqueue_jobs
from queuectl_tui.store import open_store
from queuectl_tui.timeutil import now_ms


def build(path: Path, jobs: int) -> None:
    enqueue_jobs(path, jobs)
    complete_all(path)


def timed(call: object, repeat: int = 7) -> str:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()  # type: ignore[operator]
        samples.append((time.perf_counter() - started) * 1000)
    return f"median {statistics.median(samples):.1f} ms ({min(samples):.1f}-{max(samples):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database", type=Path)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    args = parser.parse_args()
    if not args.database.exists():
        build(args.database, args.jobs)
    with open_store(args.database) as store:
        print("stats():", timed(lambda: store.stats(now_ms())))
        print("throughput():", timed(lambda: store.throughput(now_ms())))


if __name__ == "__main__":
    main()
