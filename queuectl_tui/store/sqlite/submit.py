"""One job inserted, inside the caller's write transaction: the single enqueue, a schedule's
tick, and each of many submissions (SqlStore.submit)."""

from __future__ import annotations

import sqlite3

from ...models import JobSpec
from .. import dependencies
from ..admission import insert_params
from ..base import DuplicateJobError, EnqueueResult
from ..rows import JOBS
from .links import SqliteLinks
from .statements import SQL


def insert_one(
    conn: sqlite3.Connection, spec: JobSpec, default_max_retries: int, now: int
) -> EnqueueResult:
    """Store one job, or return the one its idempotency key names; a job that runs after
    others is linked to them. Raises DuplicateJobError or UnknownParent without writing (the
    statement, not the transaction, is rolled back)."""
    if spec.idempotency_key is not None:
        known = JOBS.first(conn, SQL["job_by_idempotency_key"], {"key": spec.idempotency_key})
        if known is not None:
            return EnqueueResult(known, created=False)
    links = SqliteLinks(conn) if spec.after else None
    if links is not None:
        dependencies.check_parents(links, spec.id, spec.after)
    try:
        job = JOBS.first(conn, SQL["insert_job"], insert_params(spec, default_max_retries, now))
    except sqlite3.IntegrityError:
        raise DuplicateJobError(spec.id) from None
    assert job is not None  # RETURNING gives the row inserted
    conn.execute(SQL["count_inserted"], {"queue": spec.queue, "n": 1})
    if links is not None:
        dependencies.link(links, job.seq, job.id, spec.after, spec.after_any_end, now)
        job = JOBS.first(conn, SQL["job_by_seq"], {"seq": job.seq})
        assert job is not None
    return EnqueueResult(job, created=True)
