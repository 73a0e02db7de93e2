"""Jobs one at a time: the single enqueue, and many independent submissions in one
transaction (the HTTP face's group commit), each with its own outcome and backpressure.

Each runs inside the caller's write transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ...models import Job, JobSpec
from ..base import Admission, DuplicateJobError, EnqueueResult, SubmitResult, Submitted
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
        job = JOBS.first(
            conn,
            SQL["insert_job"],
            (
                spec.id,
                spec.command,
                spec.priority,
                now if spec.run_at is None else spec.run_at,
                default_max_retries if spec.max_retries is None else spec.max_retries,
                spec.timeout,
                spec.idempotency_key,
                now,
                now,
                spec.queue,
                spec.job_type,
                spec.payload,
            ),
        )
    except sqlite3.IntegrityError:
        raise DuplicateJobError(spec.id) from None
    assert job is not None  # RETURNING gives the row inserted
    conn.execute(SQL["count_inserted"], (spec.queue, 1))
    return EnqueueResult(job, created=True)


class _Room:
    """How many more jobs the queue (and each type) takes under an admission policy, kept
    up to date as the transaction inserts."""

    def __init__(self, conn: sqlite3.Connection, admission: Admission) -> None:
        self._conn = conn
        self._admission = admission
        self._waiting: int | None = None
        self._of_type: dict[str, int] = {}

    def refusal(self, spec: JobSpec) -> str:
        """Why the job may not be added now ('' if it may)."""
        limit = self._admission.max_depth
        if limit is not None:
            if self._waiting is None:
                self._waiting = self._conn.execute(SQL["waiting_depth"]).fetchone()[0]
            if self._waiting >= limit:
                return f"the queue is full: {self._waiting:,} jobs wait to run (limit {limit:,})"
        kind = spec.job_type
        type_limit = None if kind is None else self._admission.type_limits.get(kind)
        if kind is not None and type_limit is not None:
            if kind not in self._of_type:
                self._of_type[kind] = self._conn.execute(
                    SQL["waiting_of_type"], (kind,)
                ).fetchone()[0]
            if self._of_type[kind] >= type_limit:
                return (
                    f"jobs of type '{kind}' are full: {self._of_type[kind]:,} wait to run "
                    f"(limit {type_limit:,})"
                )
        return ""

    def took(self, job: Job) -> None:
        if self._waiting is not None:
            self._waiting += 1
        if job.job_type in self._of_type:
            self._of_type[job.job_type] += 1


def submit(
    conn: sqlite3.Connection,
    specs: Sequence[JobSpec],
    default_max_retries: int,
    now: int,
    admission: Admission,
) -> list[SubmitResult]:
    room = _Room(conn, admission)
    results: list[SubmitResult] = []
    rejected = 0
    for spec in specs:
        if spec.idempotency_key is not None:
            known = JOBS.first(conn, SQL["job_by_idempotency_key"], (spec.idempotency_key,))
            if known is not None:  # a replay is answered even when the queue is full
                results.append(SubmitResult(Submitted.EXISTING, known))
                continue
        refusal = room.refusal(spec)
        if refusal:
            rejected += 1
            results.append(SubmitResult(Submitted.REJECTED, None, refusal))
            continue
        try:
            created = insert_one(conn, spec, default_max_retries, now)
        except DuplicateJobError as error:
            results.append(SubmitResult(Submitted.DUPLICATE_ID, None, str(error)))
            continue
        room.took(created.job)
        results.append(SubmitResult(Submitted.CREATED, created.job))
    if rejected:
        conn.execute(SQL["add_to_counter"], (rejected, "admission_rejected"))
    return results
