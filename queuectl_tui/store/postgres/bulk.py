"""Bulk enqueue on PostgreSQL: COPY, batch after batch, in the caller's transaction.

A batch without idempotency keys is copied straight into jobs. A batch with keys is copied
into a temporary table first and inserted from there with ON CONFLICT DO NOTHING on the keys'
partial unique index, so that a known key is skipped, not an error. A repeated id fails the
whole transaction; the error names it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from ...models import JobSpec
from ..admission import INSERT_COLUMNS, insert_values
from ..base import BulkEnqueueResult, DuplicateJobError
from .submit import insert_one

# A new job's state is the column's default, pending.
_COLUMNS = ", ".join(INSERT_COLUMNS)
_STAGING = "queuectl_bulk_staging"


def insert_batches(
    conn: psycopg.Connection[Any],
    batches: Iterable[Sequence[JobSpec]],
    default_max_retries: int,
    now: int,
) -> BulkEnqueueResult:
    """Insert every batch, inside the caller's transaction. Each is copied on a helper thread
    while the next is produced (read and validated) here: the server's work on one batch and
    ours on the next overlap, as psycopg releases the GIL while it waits on the server. A
    batch with jobs that run after others goes a job at a time (`insert_one`), in order."""
    from concurrent.futures import Future, ThreadPoolExecutor  # here: not on every start

    # The input may come slowly (a pipe): the transaction waits for it without a time limit.
    conn.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
    created = offered = 0
    staged = [False]  # whether the staging table exists in this transaction
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="queuectl-copy") as pool:
        running: Future[int] | None = None
        try:
            for batch in batches:
                offered += len(batch)
                if not batch:
                    continue
                if running is not None:
                    created += running.result()
                    running = None
                if any(spec.after for spec in batch):  # in order: one may run after another
                    for spec in batch:
                        created += insert_one(conn, spec, default_max_retries, now).created
                    continue
                running = pool.submit(_insert, conn, batch, default_max_retries, now, staged)
            if running is not None:
                created, running = created + running.result(), None
        except pg_errors.UniqueViolation as error:
            raise DuplicateJobError(_repeated_id(error)) from None
        finally:
            if running is not None:  # the input failed: let the copy end first
                running.exception()
    return BulkEnqueueResult(created=created, existing=offered - created)


def _insert(
    conn: psycopg.Connection[Any],
    batch: Sequence[JobSpec],
    default_max_retries: int,
    now: int,
    staged: list[bool],
) -> int:
    """One batch: copied into jobs, or through the staging table when it carries keys."""
    if not any(spec.idempotency_key is not None for spec in batch):
        return _copy(conn, "jobs", batch, default_max_retries, now)
    if not staged[0]:
        conn.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {_STAGING} "
            "(LIKE jobs INCLUDING DEFAULTS INCLUDING IDENTITY) ON COMMIT DELETE ROWS"
        )
        staged[0] = True
    conn.execute(f"TRUNCATE {_STAGING}")
    _copy(conn, _STAGING, batch, default_max_retries, now)
    cursor = conn.execute(
        f"INSERT INTO jobs ({_COLUMNS}) SELECT {_COLUMNS} FROM {_STAGING} ORDER BY seq "
        "ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING"
    )
    return cursor.rowcount


def _copy(
    conn: psycopg.Connection[Any],
    table: str,
    batch: Sequence[JobSpec],
    default_max_retries: int,
    now: int,
) -> int:
    with conn.cursor() as cursor:
        with cursor.copy(f"COPY {table} ({_COLUMNS}) FROM STDIN") as copy:
            for spec in batch:
                copy.write_row(insert_values(spec, default_max_retries, now))
        return cursor.rowcount


def _repeated_id(error: pg_errors.UniqueViolation) -> str:
    """The id in 'Key (id)=(...) already exists.'"""
    detail = error.diag.message_detail or ""
    prefix = "Key (id)=("
    if detail.startswith(prefix) and detail.endswith(") already exists."):
        return detail[len(prefix) : -len(") already exists.")]
    return detail or "?"
