"""SQLiteStore: the Store interface as named statements run through one connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

from ...files import DEFAULT_FILE_MODE
from ...lifecycle import RetryPolicy
from ...models import STATES, Action, Job, JobSpec, JobState, QueueCounts
from .. import dependencies
from ..base import (
    BulkEnqueueResult,
    CancelResult,
    ChangeFeed,
    ClaimRequest,
    DuplicateJobError,
    EnqueueResult,
    Exchange,
    MetricsSnapshot,
    QueueStats,
)
from ..figures import attempt_figures
from ..rows import Params, RowMap
from ..sql_base import SqlStore, first_column, in_order
from ..sqlfiles import named_statements
from . import bulk, claims, metrics, ready, submit
from .changes import SQLiteChangeFeed
from .connection import Database
from .links import SqliteLinks
from .statements import CHUNK, SQL, chunks, with_list

T = TypeVar("T")

# A queue's latency figures come from its attempts among this many latest of every queue.
QUEUE_TIMINGS_LOOK_BACK = 100_000
SCHEDULE_SQL = named_statements(Path(__file__).with_name("sql") / "schedules.sql")


class SQLiteStore(SqlStore):
    SQL = SQL
    SCHEDULE_SQL = SCHEDULE_SQL

    def __init__(
        self,
        path: str | Path,
        busy_timeout: float = 5.0,
        lock_retry_seconds: float = 60.0,
        file_mode: int = DEFAULT_FILE_MODE,
        create_at_open: bool = True,
    ) -> None:
        """Open the queue at `path`, creating the file (with `file_mode`) if there is none.
        With `create_at_open` false a missing file is created only by the first write; until
        then reads answer from an empty queue, so that reading never creates a database."""
        self.location = str(path)
        self._db = Database(
            self.location, busy_timeout, lock_retry_seconds, file_mode, create=create_at_open
        )

    def close(self) -> None:
        self._db.close()

    @property
    def exists(self) -> bool:
        return self._db.holds_file()

    def change_feed(self, mode: str = "auto", work_only: bool = False) -> ChangeFeed:
        bell = self._db.bell_path() if work_only and self.exists else None
        return SQLiteChangeFeed(self, self._db.wal_path(), mode, bell)

    def change_token(self) -> int:
        return self._db.change_token()

    # -- how SqlStore's bodies run here ------------------------------------------------------------
    def _write(
        self, body: Callable[[sqlite3.Connection], T], durable: bool, gives_work: bool = True
    ) -> T:
        return self._db.write(body, durable=durable, gives_work=gives_work)

    def _read(self, sql: str, params: Params | None = None) -> list[Any]:
        return self._db.read(sql, () if params is None else params)

    def _read_as(self, rows: RowMap[Any], sql: str, params: Params | None = None) -> list[Any]:
        return self._db.read_as(rows, sql, () if params is None else params)

    def _snapshot(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._db.snapshot()

    def _rows_among(
        self, conn: sqlite3.Connection, name: str, ids: Sequence[str], *params: object
    ) -> list[tuple[Any, ...]]:
        # No arrays in SQLite: the ids go as placeholders, as many as a statement may have.
        found: list[tuple[Any, ...]] = []
        for chunk in chunks(list(ids)):
            found += conn.execute(with_list(name, len(chunk)), (*params, *chunk)).fetchall()
        return found

    def _links(self, conn: sqlite3.Connection) -> SqliteLinks:
        return SqliteLinks(conn)

    def _insert_one(
        self, conn: sqlite3.Connection, spec: JobSpec, default_max_retries: int, now: int
    ) -> EnqueueResult:
        return submit.insert_one(conn, spec, default_max_retries, now)

    def _matching(self, texts: list[str]) -> tuple[list[str], list[Any]]:
        """Texts found through the FTS5 index: one MATCH of their phrases, all of them."""
        phrases = " AND ".join('"' + text.replace('"', '""') + '"' for text in texts)
        return [SQL["list_jobs_matching_indexed"]], [phrases]

    def _queue_depths(self, conn: sqlite3.Connection) -> list[tuple[str, str, int]]:
        return conn.execute(SQL["queue_depths"]).fetchall()

    def _oldest_due(self, conn: sqlite3.Connection, queue: str, now: int) -> int | None:
        return ready.oldest_due(conn, queue, now)

    # -- jobs --------------------------------------------------------------------------------
    def enqueue(self, spec: JobSpec, default_max_retries: int, now: int) -> EnqueueResult:
        return self._db.write(
            lambda conn: submit.insert_one(conn, spec, default_max_retries, now), durable=True
        )

    def enqueue_batches(
        self, batches: Iterable[Sequence[JobSpec]], default_max_retries: int, now: int
    ) -> BulkEnqueueResult:
        def body(conn: sqlite3.Connection) -> BulkEnqueueResult:
            return bulk.insert_batches(conn, batches, default_max_retries, now)

        try:
            return self._db.write(body, durable=True)
        except bulk.RepeatedId as repeated:  # looked up after the rollback, against stored jobs
            raise DuplicateJobError(self._existing_id(repeated.batches)) from None

    def _existing_id(self, batches: Sequence[Sequence[JobSpec]]) -> str:
        """Which id made a batch insert fail: one repeated in the input, or one already stored
        (only called on that rare path, after the failed transaction was rolled back)."""
        ids = [spec.id for batch in batches for spec in batch]
        seen: set[str] = set()
        for job_id in ids:
            if job_id in seen:
                return job_id
            seen.add(job_id)
        for chunk in chunks(ids):
            rows = self._db.read(with_list("stored_id_among", len(chunk)), chunk)
            if rows:
                return str(rows[0][0])
        return ids[0] if ids else ""

    def set_text_index(self, on: bool) -> None:
        def build(conn: sqlite3.Connection) -> None:
            if conn.execute(SQL["text_index_present"]).fetchone()[0]:
                return
            for name in TEXT_INDEX_BUILD:
                conn.execute(SQL[name])

        def drop(conn: sqlite3.Connection) -> None:
            for name in TEXT_INDEX_DROP:
                conn.execute(SQL[name])

        # One transaction: a writer in between would change jobs the index has not read.
        self._db.write(build if on else drop, durable=True)

    def counts(self, queue: str | None = None) -> dict[JobState, int]:
        rows = self._db.read(*_counts_statement(queue))
        found = {JobState(state): n for state, n in rows}
        return {state: found.get(state, 0) for state in STATES}

    def queue_counts(self, queue: str | None = None) -> QueueCounts:
        with self._db.snapshot() as conn:  # one snapshot for both reads
            rows = conn.execute(*_counts_statement(queue)).fetchall()
            active = conn.execute(SQL["count_active_workers"]).fetchone()[0]
        found = {JobState(state): n for state, n in rows}
        return QueueCounts({s: found.get(s, 0) for s in STATES}, active)

    def stats(self, now: int, sample: int = 10_000, queue: str | None = None) -> QueueStats:
        result = QueueStats(counts=self.queue_counts(queue), queue=queue)
        result.completed_per_minute, result.failed_per_minute = self.throughput(now, queue=queue)
        since = {"since": now - 60_000, "queue": queue}
        latest = {"limit": sample, "queue": queue, "look_back": QUEUE_TIMINGS_LOOK_BACK}
        if queue is None:
            last_minute = self._db.read(SQL["outcomes_since"], since)
            rows = self._db.read(SQL["latest_timings"], latest)
        else:  # by statements of their own: each keeps its index
            last_minute = self._db.read(SQL["queue_outcomes_since"], since)
            rows = self._db.read(SQL["queue_latest_timings"], latest)
        totals = self._db.read(SQL["attempt_totals"], {"queue": queue})
        attempt_figures(result, last_minute, totals, rows)
        return result

    def metrics(self, now: int) -> MetricsSnapshot:
        with self._db.snapshot() as conn:  # every figure from one state of the queue
            return metrics.read(conn, now)

    def cancel(self, job_ids: Sequence[str], now: int, action: Action | None) -> CancelResult:
        def body(conn: sqlite3.Connection) -> CancelResult:
            ids = self._unique(job_ids)
            cancelled = first_column(
                self._rows_among(conn, "cancel_waiting_among", ids, now, now, now)
            )
            requested = first_column(self._rows_among(conn, "request_cancel_among", ids, now, now))
            ended = [(job_id, "cancelled") for job_id in cancelled]
            dependencies.jobs_ended(SqliteLinks(conn), ended, now)
            self._record(conn, action, len(cancelled) + len(requested), now)
            return CancelResult(in_order(cancelled, ids), in_order(requested, ids))

        return self._db.write(body, durable=True)

    def prune(self, state: JobState, before: int, limit: int) -> int:
        def body(conn: sqlite3.Connection) -> int:
            # Oldest first, a batch at a time: each transaction stays short.
            params = {"state": state.value, "before": before, "limit": min(limit, CHUNK)}
            found = conn.execute(SQL["prunable"], params)
            seqs = [row[0] for row in found]
            if seqs:
                conn.execute(with_list("delete_seqs", len(seqs)), seqs)
            return len(seqs)

        return self._db.write(body)

    # -- the engine's protocol ------------------------------------------------------------------
    def exchange(self, request: ClaimRequest) -> Exchange:
        # The hot path of a busy pool: every run that ended since the last call is recorded
        # and every free worker gets its next job, in one transaction (one WAL commit).
        def body(conn: sqlite3.Connection) -> Exchange:
            return claims.exchange(conn, request)

        # Claims and plain results wake no other pool: they leave nobody work.
        return self._db.write(body, gives_work=_made_work)

    def has_due_work(self, now: int, queues: Sequence[str] | None = None) -> bool:
        with self._db.snapshot() as conn:
            return claims.has_due_work(conn, queues, now)

    def wait_for_writers(self) -> None:
        self._db.wait_for_writers()

    def next_run_at(self, after: int) -> int | None:
        with self._db.snapshot() as conn:
            return ready.next_run_at(conn, after)

    def recover_orphans(
        self, dead_worker_ids: Sequence[str], policy: RetryPolicy, now: int
    ) -> list[Job]:
        def body(conn: sqlite3.Connection) -> list[Job]:
            return claims.recover_orphans(conn, dead_worker_ids, policy, now)

        return self._db.write(body)

    def heartbeat(self, worker_ids: Sequence[str], now: int) -> None:
        def body(conn: sqlite3.Connection) -> None:
            self._rows_among(conn, "heartbeat_among", worker_ids, now)

        self._db.write(body, gives_work=False)


TEXT_INDEX_BUILD = (
    "text_index_table",
    "text_index_on_insert",
    "text_index_on_delete",
    "text_index_on_update",
    "text_index_rebuild",
)
TEXT_INDEX_DROP = (
    "text_index_drop_insert",
    "text_index_drop_delete",
    "text_index_drop_update",
    "text_index_drop_table",
)


def _counts_statement(queue: str | None) -> tuple[str, dict[str, str]]:
    if queue is None:
        return SQL["state_counts"], {}
    return SQL["queue_state_counts"], {"queue": queue}


def _made_work(exchange: Exchange) -> bool:
    return exchange.made_work
