"""A queue with a long history, for measuring what must not grow with it (`stats`).

The history is written with SQL directly: running a million jobs through a pool would take
many minutes. Every job completes once, its attempt finishing within the last hour; the
store's triggers keep their counters as a pool's settlements would."""

from __future__ import annotations

import sqlite3
from os import PathLike, fspath

from ..location import scheme
from ..models import JobSpec
from ..store import open_store
from ..timeutil import now_ms

BATCH = 100_000
HOUR_MS = 3_600_000


def enqueue_jobs(location: str | PathLike[str], jobs: int, prefix: str = "j") -> None:
    with open_store(fspath(location)) as store:
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


def complete_all(where: str | PathLike[str]) -> None:
    """Give every job one completed attempt, finished over the last hour."""
    location = fspath(where)
    if scheme(location) == "postgresql":
        _complete_all_postgres(location)
        return
    begin = now_ms() - HOUR_MS  # a SQLite file, whose store's clock is this host's
    with sqlite3.connect(location) as conn:
        jobs = conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
        spacing = HOUR_MS // max(jobs, 1)
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


def _complete_all_postgres(location: str) -> None:
    """The same on PostgreSQL, in one transaction: the statement triggers add up each
    statement's rows once, so one INSERT and one UPDATE keep the counters."""
    import psycopg  # only for a PostgreSQL run

    from ..store.postgres.url import parse

    with open_store(location) as store:
        begin = store.now() - HOUR_MS  # the database's clock, as the store's reads use
    target = parse(location)
    with psycopg.connect(target.conninfo, options=f"-c search_path={target.schema}") as conn:
        row = conn.execute("SELECT count(*) FROM jobs").fetchone()
        spacing = HOUR_MS // max(row[0] if row else 0, 1)
        conn.execute(
            """INSERT INTO attempts (job_seq, queue, number, worker_id, scheduled_at, started_at,
                                     finished_at, exit_code, outcome, output)
               SELECT seq, queue, 1, 'w', %(b)s + seq * %(s)s, %(b)s + seq * %(s)s + 1,
                      %(b)s + seq * %(s)s + 2, 0, 'completed', ''
                 FROM jobs""",
            {"b": begin, "s": spacing},
        )
        conn.execute("UPDATE jobs SET state = 'completed', runs = 1, attempts = 1")
        # Planner statistics, as autovacuum would gather them within a minute of such a
        # load (and nothing does where it is off): without them `stats` scans every attempt.
        conn.execute("ANALYZE jobs, attempts")
    with open_store(location) as store:
        # The triggers left their counts as deltas; a pool's heartbeat folds them into the
        # totals, as it would have done many times over while it ran these jobs.
        store.heartbeat([], store.now())
