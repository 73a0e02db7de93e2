"""One job inserted on PostgreSQL: the single enqueue, a schedule's tick, and each of many
submissions (SqlStore.submit). Each runs in the caller's transaction (or, for a job that runs
after no other, as a statement of its own)."""

from __future__ import annotations

from typing import Any

import psycopg

from ...models import JobSpec
from .. import dependencies
from ..admission import insert_params
from ..base import DuplicateJobError, EnqueueResult
from ..rows import JOBS
from .links import PostgresLinks
from .statements import SQL

Conn = psycopg.Connection[Any]


def insert_one(conn: Conn, spec: JobSpec, default_max_retries: int, now: int) -> EnqueueResult:
    """Store one job, or return the one its idempotency key names; a job that runs after
    others is linked to them (in a transaction). Raises DuplicateJobError or UnknownParent,
    leaving the caller's transaction usable (the insert did nothing)."""
    links = PostgresLinks(conn) if spec.after else None
    if links is not None:
        if spec.idempotency_key is not None:  # a replay is answered before anything else
            known = JOBS.first(conn, SQL["job_by_idempotency_key"], {"key": spec.idempotency_key})
            if known is not None:
                return EnqueueResult(known, created=False)
        dependencies.check_parents(links, spec.id, spec.after)
    job = JOBS.first(conn, SQL["insert_job"], insert_params(spec, default_max_retries, now))
    if job is not None and links is not None:
        dependencies.link(links, job.seq, job.id, spec.after, spec.after_any_end, now)
        job = JOBS.first(conn, SQL["job_by_seq"], {"seq": job.seq})
    if job is not None:
        return EnqueueResult(job, created=True)
    if spec.idempotency_key is not None:  # the key is taken: that job
        known = JOBS.first(conn, SQL["job_by_idempotency_key"], {"key": spec.idempotency_key})
        if known is not None:
            return EnqueueResult(known, created=False)
    raise DuplicateJobError(spec.id)
