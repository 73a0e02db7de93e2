"""What benchmarks and measurements do to a queue that no operation does, in SQL, which only
the store speaks: a long history written straight in, planner statistics, and the server in
words. Nothing here is used by a pool or an operator."""

from __future__ import annotations

import sqlite3

from ..location import scheme
from ..timeutil import now_ms
from . import open_store

HOUR_MS = 3_600_000


def complete_all(location: str) -> None:
    """Give every job one completed attempt, finished over the last hour."""
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

    from .postgres.url import parse

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


def analyze(location: str) -> None:
    """The statistics autovacuum gathers on a server within a minute of such a load (and
    that SQLite keeps when asked): the plans measured are those of a normal database."""
    if scheme(location) == "postgresql":
        import psycopg  # only for a PostgreSQL run

        from .postgres.url import parse

        target = parse(location)
        options = f"-c search_path={target.schema}"
        with psycopg.connect(target.conninfo, options=options, autocommit=True) as conn:
            conn.execute("ANALYZE jobs")
        return
    database = sqlite3.connect(location)
    try:
        database.execute("ANALYZE")
    finally:
        database.close()


def describe(base_url: str | None) -> str:
    """The database a benchmark measures, in words: SQLite files (None), or the PostgreSQL
    server `base_url` names (a StoreError if it cannot be reached)."""
    if base_url is None:
        return f"SQLite {sqlite3.sqlite_version}, temporary files"
    import psycopg  # only for a PostgreSQL run

    from .postgres.database import CONNECT_TIMEOUT, store_errors
    from .postgres.url import parse

    target = parse(base_url)
    with (
        store_errors(target.shown),
        psycopg.connect(target.conninfo, connect_timeout=CONNECT_TIMEOUT) as conn,
    ):
        version = conn.info.server_version  # e.g. 150020 for 15.20
        where = f"{conn.info.host}/{conn.info.dbname}"
    return (
        f"PostgreSQL {version // 10000}.{version % 10000} at {where} (schemas dropped afterwards)"
    )
