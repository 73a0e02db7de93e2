"""Jobs one at a time: the single enqueue, and many independent submissions in one
transaction (the HTTP face's group commit), each with its own outcome and backpressure.

Each runs inside the caller's write transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ...models import JobSpec, Operator
from ..admission import Room, audit_rows, insert_values, submit_each
from ..base import Admission, DuplicateJobError, EnqueueResult, SubmitResult
from ..rows import JOBS
from .statements import SQL


def insert_one(
    conn: sqlite3.Connection, spec: JobSpec, default_max_retries: int, now: int
) -> EnqueueResult:
    """Store one job, or return the one its idempotency key names. Raises DuplicateJobError
    (the statement, not the transaction, is rolled back)."""
    if spec.idempotency_key is not None:
        known = JOBS.first(conn, SQL["job_by_idempotency_key"], (spec.idempotency_key,))
        if known is not None:
            return EnqueueResult(known, created=False)
    try:
        job = JOBS.first(conn, SQL["insert_job"], insert_values(spec, default_max_retries, now))
    except sqlite3.IntegrityError:
        raise DuplicateJobError(spec.id) from None
    assert job is not None  # RETURNING gives the row inserted
    conn.execute(SQL["count_inserted"], (spec.queue, 1))
    return EnqueueResult(job, created=True)


def submit(
    conn: sqlite3.Connection,
    specs: Sequence[JobSpec],
    default_max_retries: int,
    now: int,
    admission: Admission,
    submitters: Sequence[Operator] = (),
) -> list[SubmitResult]:
    room = Room(
        admission,
        waiting=lambda: int(conn.execute(SQL["waiting_depth"]).fetchone()[0]),
        waiting_of_type=lambda kind: int(
            conn.execute(SQL["waiting_of_type"], (kind,)).fetchone()[0]
        ),
        queues=lambda: [name for (name,) in conn.execute(SQL["existing_queues"])],
    )
    results, rejected = submit_each(
        specs,
        room,
        known=lambda key: JOBS.first(conn, SQL["job_by_idempotency_key"], (key,)),
        insert=lambda spec: insert_one(conn, spec, default_max_retries, now),
    )
    if rejected:
        conn.execute(SQL["add_to_counter"], (rejected, "admission_rejected"))
    conn.executemany(SQL["record_action"], audit_rows(results, submitters, now))
    return results
