"""SQLiteStore: the Store interface as named statements run through one connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from ...error_groups import ErrorGroup
from ...files import DEFAULT_FILE_MODE
from ...lifecycle import RetryPolicy
from ...models import (
    STATES,
    WAITING_STATES,
    Action,
    Attempt,
    AuditEntry,
    Job,
    JobSpec,
    JobState,
    Operator,
    OutputChunk,
    QueueCounts,
    QueueInfo,
    Worker,
    WorkerStatus,
)
from ...query import JobQuery
from ..base import (
    Admission,
    BulkEnqueueResult,
    CancelResult,
    ChangeFeed,
    DuplicateJobError,
    EnqueueResult,
    Exchange,
    MetricsSnapshot,
    OutputAppend,
    QueueStats,
    RetryResult,
    Settlement,
    Store,
    SubmitResult,
)
from ..figures import RATE_SLOT_MS, attempt_figures, per_minute
from ..listing import count_jobs_statement, list_jobs_statement
from ..output_rows import chunk_rows, forget_params
from ..rows import ATTEMPTS, AUDIT, JOBS, OUTPUT_CHUNKS, WORKERS, worker_values
from . import bulk, claims, control, metrics, ready, submit
from .changes import SQLiteChangeFeed
from .connection import Database
from .statements import CHUNK, SQL, chunks, with_list

# A queue's latency figures come from its attempts among this many latest of every queue.
QUEUE_TIMINGS_LOOK_BACK = 100_000


class SQLiteStore(Store):
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

    def change_feed(self, mode: str = "auto") -> ChangeFeed:
        return SQLiteChangeFeed(self, self._db.wal_path(), mode)

    def change_token(self) -> int:
        return self._db.change_token()

    # -- jobs --------------------------------------------------------------------------------
    def enqueue(self, spec: JobSpec, default_max_retries: int, now: int) -> EnqueueResult:
        return self._db.write(
            lambda conn: submit.insert_one(conn, spec, default_max_retries, now), durable=True
        )

    def submit(
        self,
        specs: Sequence[JobSpec],
        default_max_retries: int,
        now: int,
        admission: Admission,
        submitters: Sequence[Operator] = (),
    ) -> list[SubmitResult]:
        return self._db.write(
            lambda conn: submit.submit(
                conn, specs, default_max_retries, now, admission, submitters
            ),
            durable=True,
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

    def get(self, job_id: str) -> Job | None:
        jobs = self._db.read_as(JOBS, SQL["job_by_id"], (job_id,))
        return jobs[0] if jobs else None

    def attempts(self, job_id: str) -> list[Attempt]:
        return self._db.read_as(ATTEMPTS, SQL["job_attempts"], (job_id,))

    def append_output(self, appends: Sequence[OutputAppend]) -> None:
        if appends:
            self._db.write(lambda conn: _append_output(conn, appends))

    def output_chunks(
        self, job_id: str, run: int, after_seq: int = -1, limit: int = 1000
    ) -> list[OutputChunk]:
        return self._db.read_as(
            OUTPUT_CHUNKS, SQL["output_chunks"], (job_id, run, after_seq, limit)
        )

    def error_groups(self, state: JobState, limit: int = 100) -> list[ErrorGroup]:
        rows = self._db.read(SQL["error_groups"], (state.value, limit))
        return [ErrorGroup(*row) for row in rows]

    def error_group_ids(self, state: JobState, fingerprint: str) -> list[str]:
        return [row[0] for row in self._db.read(SQL["error_group_ids"], (state.value, fingerprint))]

    def list_jobs(
        self,
        state: JobState | None = None,
        limit: int = 50,
        after_seq: int | None = None,
        newest_first: bool = False,
        search: str | None = None,
        queue: str | None = None,
        query: JobQuery | None = None,
    ) -> list[Job]:
        sql, params = list_jobs_statement(
            SQL, state, limit, after_seq, newest_first, search, queue, query
        )
        return self._db.read_as(JOBS, sql, params)

    def count_jobs(self, query: JobQuery) -> int:
        return int(self._db.read(*count_jobs_statement(SQL, query))[0][0])

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
        if queue is None:
            last_minute = self._db.read(SQL["outcomes_since"], (now - 60_000,))
            rows = self._db.read(SQL["latest_timings"], (sample,))
        else:
            last_minute = self._db.read(SQL["queue_outcomes_since"], (now - 60_000, queue))
            rows = self._db.read(
                SQL["queue_latest_timings"], (queue, QUEUE_TIMINGS_LOOK_BACK, sample)
            )
        totals = self._db.read(SQL["attempt_totals"], (queue,))
        attempt_figures(result, last_minute, totals, rows)
        return result

    def throughput(
        self, now: int, minutes: int = 15, queue: str | None = None
    ) -> tuple[list[int], list[int]]:
        since = now - minutes * 60_000
        slots = self._db.read(
            SQL["attempt_rates"], (since // RATE_SLOT_MS, now // RATE_SLOT_MS, queue)
        )
        return per_minute(slots, now, minutes)

    def metrics(self, now: int) -> MetricsSnapshot:
        with self._db.snapshot() as conn:  # every figure from one state of the queue
            return metrics.read(conn, now)

    def retry_dead(
        self, job_ids: Sequence[str] | None, now: int, action: Action | None = None
    ) -> list[str]:
        def body(conn: sqlite3.Connection) -> list[str]:
            retried: list[str] = []
            if job_ids is None:
                retried = [row[0] for row in conn.execute(SQL["retry_all_dead"], (now, now))]
            for chunk in chunks(list(dict.fromkeys(job_ids or ()))):
                cursor = conn.execute(with_list("retry_dead_among", len(chunk)), (now, now, *chunk))
                retried.extend(row[0] for row in cursor)
            if action is not None:
                control.record(conn, action, len(retried), now)
            return retried

        return self._db.write(body, durable=True)

    # -- an operator's control -------------------------------------------------------------------
    def job_states(self, job_ids: Sequence[str]) -> dict[str, JobState]:
        with self._db.snapshot() as conn:
            return control.states(conn, job_ids)

    def cancel(self, job_ids: Sequence[str], now: int, action: Action | None) -> CancelResult:
        return self._db.write(lambda conn: control.cancel(conn, job_ids, now, action), durable=True)

    def cancel_requested(self, job_ids: Sequence[str]) -> list[str]:
        found: list[str] = []
        for chunk in chunks(list(job_ids)):
            rows = self._db.read(with_list("cancel_requested_among", len(chunk)), chunk)
            found.extend(row[0] for row in rows)
        return found

    def retry(self, job_ids: Sequence[str], now: int, action: Action | None) -> RetryResult:
        return self._db.write(lambda conn: control.retry(conn, job_ids, now, action), durable=True)

    def delete(
        self,
        job_ids: Sequence[str],
        now: int,
        action: Action | None,
        state: JobState | None = None,
    ) -> list[str]:
        return self._db.write(
            lambda conn: control.delete(conn, job_ids, now, action, state), durable=True
        )

    def prune(self, state: JobState, before: int, limit: int) -> int:
        batch = min(limit, CHUNK)
        return self._db.write(lambda conn: control.prune_batch(conn, state, before, batch))

    def count_prunable(self, state: JobState, before: int) -> int:
        return int(self._db.read(SQL["count_prunable"], (state.value, before))[0][0])

    def record_action(self, action: Action, touched: int, now: int) -> None:
        self._db.write(lambda conn: control.record(conn, action, touched, now), durable=True)

    def actions(self, limit: int = 50, before_id: int | None = None) -> list[AuditEntry]:
        return self._db.read_as(AUDIT, SQL["list_actions"], (before_id, before_id, limit))

    # -- queues ----------------------------------------------------------------------------------
    def queues(self, now: int) -> list[QueueInfo]:
        with self._db.snapshot() as conn:
            settings = {
                name: (bool(paused), max_running)
                for name, paused, max_running in conn.execute(SQL["queue_settings"])
            }
            by_queue: dict[str, dict[JobState, int]] = {name: {} for name in settings}
            for name, state, n in conn.execute(SQL["queue_depths"]):
                by_queue.setdefault(name, {})[JobState(state)] = n
            found = []
            for name in sorted(by_queue):
                counts = by_queue[name]
                waiting = sum(counts.get(state, 0) for state in WAITING_STATES)
                oldest = ready.oldest_due(conn, name, now) if waiting else None
                paused, max_running = settings.get(name, (False, None))
                found.append(
                    QueueInfo(
                        name,
                        waiting,
                        counts.get(JobState.PROCESSING, 0),
                        paused,
                        max_running,
                        oldest,
                        {state: counts.get(state, 0) for state in STATES},
                    )
                )
            return found

    def set_queue_paused(self, name: str, paused: bool, now: int, action: Action) -> None:
        self._db.write(
            lambda conn: control.set_paused(conn, name, paused, now, action), durable=True
        )

    def set_queue_limit(self, name: str, limit: int | None, now: int, action: Action) -> None:
        self._db.write(lambda conn: control.set_limit(conn, name, limit, now, action), durable=True)

    # -- the engine's protocol ------------------------------------------------------------------
    def exchange(
        self,
        settlements: Sequence[Settlement],
        claimants: Sequence[str],
        pid: int,
        now: int,
        policy: RetryPolicy,
        queues: Sequence[str] | None = None,
    ) -> Exchange:
        # The hot path of a busy pool: every run that ended since the last call is recorded
        # and every free worker gets its next job, in one transaction (one WAL commit).
        def body(conn: sqlite3.Connection) -> Exchange:
            return claims.exchange(conn, settlements, claimants, pid, now, policy, queues)

        return self._db.write(body)

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

    # -- workers -------------------------------------------------------------------------------
    def register_workers(self, workers: Sequence[Worker]) -> int:
        rows = [worker_values(worker) for worker in workers]

        def body(conn: sqlite3.Connection) -> int:
            conn.executemany(SQL["register_worker"], rows)
            return int(conn.execute(SQL["latest_stop_request"]).fetchone()[0])

        return self._db.write(body)

    def heartbeat(self, worker_ids: Sequence[str], now: int) -> None:
        def body(conn: sqlite3.Connection) -> None:
            for chunk in chunks(list(worker_ids)):
                conn.execute(with_list("heartbeat_among", len(chunk)), (now, *chunk))

        self._db.write(body)

    def set_worker_status(
        self,
        worker_id: str,
        status: WorkerStatus,
        current_job: str | None,
        now: int,
        done: int = 0,
        failed: int = 0,
    ) -> None:
        ended = status in (WorkerStatus.STOPPED, WorkerStatus.LOST)

        def body(conn: sqlite3.Connection) -> None:
            conn.execute(
                SQL["set_worker_status"],
                (status.value, current_job, now, ended, now, done, failed, worker_id),
            )

        self._db.write(body)

    def list_workers(self, active_only: bool = False) -> list[Worker]:
        sql = SQL["list_active_workers" if active_only else "list_workers"]
        return self._db.read_as(WORKERS, sql)

    def prune_workers(self, stopped_before: int) -> int:
        def body(conn: sqlite3.Connection) -> int:
            return conn.execute(SQL["prune_workers"], (stopped_before,)).rowcount

        return self._db.write(body)

    def request_stop(self, now: int) -> list[Worker]:
        def body(conn: sqlite3.Connection) -> list[Worker]:
            conn.execute(SQL["request_stop"], (now,))
            return WORKERS.all(conn, SQL["active_workers_by_id"])

        return self._db.write(body, durable=True)

    def stop_requested_after(self, request_id: int) -> bool:
        rows = self._db.read(SQL["stop_requested_after"], (request_id,))
        return bool(rows)

    def stop_requested_since(self, since: int) -> bool:
        rows = self._db.read(SQL["stop_requested_since"], (since,))
        return bool(rows)


def _counts_statement(queue: str | None) -> tuple[str, tuple[str, ...]]:
    if queue is None:
        return SQL["state_counts"], ()
    return SQL["queue_state_counts"], (queue,)


def _append_output(conn: sqlite3.Connection, appends: Sequence[OutputAppend]) -> None:
    for append in appends:
        conn.executemany(SQL["append_output"], chunk_rows(append))
        forget = forget_params(append)
        if forget is not None:
            conn.execute(SQL["forget_output"], forget)
