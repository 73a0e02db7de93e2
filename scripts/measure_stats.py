"""Build a queue with a long history of finished attempts and time `stats` on it.

    python scripts/measure_stats.py /tmp/history.db [--jobs 1000000]

The history is written with SQL directly (running a million jobs through a pool would take
many minutes): every job completed once, finished over the last hour. Prints the median and
range of seven calls of the store's stats() and of the console's per-minute rates."""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import time
from pathlib import Path

from queuectl_tui.models import JobSpec
from queuectl_tui.store import open_store
from queuectl_tui.timeutil import now_ms

BATCH = 100_000


def build(path: Path, jobs: int) -> None:
    with open_store(path) as store:
        for start in range(0, jobs, BATCH):
            count = min(BATCH, jobs - start)
            store.enqueue_many(
                [JobSpec(f"j{n}", "true", 0, None, 0) for n in range(start, start + count)],
                0,
                now_ms(),
            )
    begin = now_ms() - 3_600_000
    spacing = 3_600_000 // max(jobs, 1)
    with sqlite3.connect(path) as conn:
        conn.execute(
            """INSERT INTO attempts (job_seq, number, worker_id, scheduled_at, started_at,
                                     finished_at, exit_code, outcome, output)
               SELECT seq, 1, 'w', ?1 + seq * ?2, ?1 + seq * ?2 + 1, ?1 + seq * ?2 + 2, 0,
                      'completed', ''
                 FROM jobs""",
            (begin, spacing),
        )
        conn.execute("UPDATE jobs SET state = 'completed', runs = 1, attempts = 1")


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
