"""A queue with a long history, for measuring what must not grow with it (`stats`).

The history is written with SQL directly: running a million jobs through a pool would take
many minutes. Every job completes once, its attempt finishing within the last hour; the
store's triggers keep their counters as a pool's settlements would."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..models import JobSpec
from ..store import open_store
from ..timeutil import now_ms

BATCH = 100_000


def enqueue_jobs(path: Path, jobs: int, prefix: str = "j") -> None:
    with open_store(path) as store:
        for start in range(0, jobs, BATCH):
            count = min(BATCH, jobs - start)
            store.enqueue_many(
                [
                    JobSpec(f"{prefix}{n}", f"echo {n}", n % 5, None, 0)
                    for n in range(start, start + count)
                ],
                0,
                store.now(),
            )


def complete_all(path: Path) -> None:
    """Give every job one completed attempt, finished over the last hour."""
    begin = now_ms() - 3_600_000  # a SQLite file, whose store's clock is this host's
    with sqlite3.connect(path) as conn:
        jobs = conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
        spacing = 3_600_000 // max(jobs, 1)
        conn.execute(
            """INSERT INTO attempts (job_seq, number, worker_id, scheduled_at, started_at,
                                     finished_at, exit_code, outcome, output)
               SELECT seq, 1, 'w', ?1 + seq * ?2, ?1 + seq * ?2 + 1, ?1 + seq * ?2 + 2, 0,
                      'completed', ''
                 FROM jobs""",
            (begin, spacing),
        )
        conn.execute("UPDATE jobs SET state = 'completed', runs = 1, attempts = 1")
    conn.close()
