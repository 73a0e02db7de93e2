"""The SQLite store: WAL journal, busy timeout, and one `BEGIN IMMEDIATE` transaction per
state change, so that claims are atomic across threads and separate OS processes."""

from __future__ import annotations

import json
import logging
import operator
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ...files import DEFAULT_FILE_MODE
from ...lifecycle import RetryPolicy, after_attempt
from ...models import (
    STATES,
    Attempt,
    Job,
    JobSpec,
    JobState,
    Outcome,
    QueueCounts,
    Worker,
    WorkerStatus,
)
from ..base import (
    BulkEnqueueResult,
    ChangeFeed,
    DuplicateJobError,
    EnqueueResult,
    Exchange,
    QueueStats,
    Settlement,
    SettleResult,
    Store,
)
from .changes import SQLiteChangeFeed
from .connection import Database
from .rows import ATTEMPTS, JOBS, WORKERS
from .statements import SQL, with_list

log = logging.getLogger("queuectl.store")

T = TypeVar("T")

# Outcomes that count as failed attempts (a cancelled run was interrupted, not failed).
FAILED_OUTCOMES = frozenset({"failed", "timeout", "lost"})
RATE_SLOT_MS = 10_000  # the width of a slot of attempt_rates (schema migration 2)

# Bulk insert: each batch travels as one JSON array of rows that SQLite unpacks itself. Only
# the fields some job of the batch sets travel; the others take their defaults in SQL (every
# json_extract costs a parse of the row, a third of the insert when all seven are read).
# Columns: (name, JobSpec index, what an unset value becomes: ?2 is now, ?3 the default
# max_retries).
_BULK_COLUMNS = (
    ("priority", 2, "0"),
    ("run_at", 3, "?2"),
    ("max_retries", 4, "?3"),
    ("timeout", 5, "NULL"),
    ("idempotency_key", 6, "NULL"),
)
_BULK_DEFAULTS = JobSpec("", "")


def _bulk_insert(batch: Sequence[JobSpec]) -> tuple[str, str]:
    """The INSERT statement and the JSON payload for one batch."""
    set_fields = [
        (name, index, default)
        for name, index, default in _BULK_COLUMNS
        if any(spec[index] != _BULK_DEFAULTS[index] for spec in batch)
    ]
    values = ["json_extract(value, '$[0]')", "json_extract(value, '$[1]')"]
    position = {index: place for place, (_, index, _) in enumerate(set_fields, start=2)}
    for _, index, default in _BULK_COLUMNS:
        if index in position:
            values.append(f"coalesce(json_extract(value, '$[{position[index]}]'), {default})")
        else:
            values.append(default)
    names = ", ".join(name for name, _, _ in _BULK_COLUMNS)
    sql = (
        f"INSERT INTO jobs (id, command, {names}, state, created_at, updated_at) "
        f"SELECT {', '.join(values)}, 'pending', ?2, ?2 FROM json_each(?1) WHERE true "
        "ON CONFLICT (idempotency_key) DO NOTHING"
    )
    if not set_fields:
        rows: Sequence[Any] = [spec[:2] for spec in batch]
    elif [index for _, index, _ in set_fields] == list(range(2, 2 + len(set_fields))):
        rows = [spec[: 2 + len(set_fields)] for spec in batch]
    else:
        pick = operator.itemgetter(0, 1, *(index for _, index, _ in set_fields))
        rows = [pick(spec) for spec in batch]
    return sql, json.dumps(rows, ensure_ascii=False)


# Parameters per IN (...) list; SQLite allows 32,766 but smaller chunks keep statements cheap.
_CHUNK = 500


@dataclass(slots=True)
class _WorkerTouch:
    """How one exchange changes one worker's row."""

    job: Job | None = None
    done: int = 0
    failed: int = 0


class _RepeatedId(Exception):
    """An id of a bulk insert exists already; carries the batches to find which one."""

    def __init__(self, batches: Sequence[Sequence[JobSpec]]) -> None:
        super().__init__("repeated id")
        self.batches = batches


def _count_inserted(conn: sqlite3.Connection, created: int) -> None:
    if created:
        conn.execute(SQL["count_inserted"], (created,))


def _chunks(items: Sequence[T], size: int = _CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


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

    def change_feed(self, mode: str = "auto") -> ChangeFeed:
        return SQLiteChangeFeed(self, self._db.wal_path(), mode)

    def change_token(self) -> int:
        return self._db.change_token()

    # -- jobs --------------------------------------------------------------------------------
    def enqueue(self, spec: JobSpec, default_max_retries: int, now: int) -> EnqueueResult:
        def body(conn: sqlite3.Connection) -> EnqueueResult:
            if spec.idempotency_key is not None:
                known = JOBS.first(
                    conn.execute(SQL["job_by_idempotency_key"], (spec.idempotency_key,))
                )
                if known is not None:
                    return EnqueueResult(known, created=False)
            try:
                inserted = conn.execute(
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
                    ),
                )
                job = JOBS.first(inserted)
            except sqlite3.IntegrityError:
                raise DuplicateJobError(spec.id) from None
            assert job is not None  # RETURNING gives the row inserted
            _count_inserted(conn, 1)
            return EnqueueResult(job, created=True)

        return self._db.write(body, durable=True)

    def enqueue_batches(
        self, batches: Iterable[Sequence[JobSpec]], default_max_retries: int, now: int
    ) -> BulkEnqueueResult:
        # Each batch travels as one JSON text that SQLite unpacks itself (three times faster
        # than binding rows from Python), and is inserted on a helper thread: SQLite releases
        # the GIL while it works, so the next batch is produced and encoded meanwhile.
        def body(conn: sqlite3.Connection) -> BulkEnqueueResult:
            taken: list[Sequence[JobSpec]] = []
            created = 0
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="queuectl-insert") as pool:
                running: Future[int] | None = None
                try:
                    for batch in batches:
                        taken.append(batch)
                        sql, payload = _bulk_insert(batch)
                        if running is not None:
                            created += running.result()
                        running = pool.submit(
                            self._insert_batch, conn, sql, payload, now, default_max_retries
                        )
                    if running is not None:
                        created, running = created + running.result(), None
                except sqlite3.IntegrityError:
                    raise _RepeatedId(taken) from None
                finally:
                    if running is not None:  # the input failed: let the insert end first
                        running.exception()
            _count_inserted(conn, created)
            offered = sum(len(batch) for batch in taken)
            return BulkEnqueueResult(created=created, existing=offered - created)

        try:
            return self._db.write(body, durable=True)
        except _RepeatedId as repeated:  # looked up after the rollback, against stored jobs
            raise DuplicateJobError(self._existing_id(repeated.batches)) from None

    @staticmethod
    def _insert_batch(
        conn: sqlite3.Connection, sql: str, payload: str, now: int, max_retries: int
    ) -> int:
        return conn.execute(sql, (payload, now, max_retries)).rowcount

    def _existing_id(self, batches: Sequence[Sequence[JobSpec]]) -> str:
        """Which id made a batch insert fail: one repeated in the input, or one already stored
        (only called on that rare path, after the failed transaction was rolled back)."""
        ids = [spec.id for batch in batches for spec in batch]
        seen: set[str] = set()
        for job_id in ids:
            if job_id in seen:
                return job_id
            seen.add(job_id)
        for chunk in _chunks(ids):
            rows = self._db.read(with_list("stored_id_among", len(chunk)), chunk)
            if rows:
                return str(rows[0][0])
        return ids[0] if ids else ""

    def get(self, job_id: str) -> Job | None:
        jobs = self._db.read_as(JOBS, SQL["job_by_id"], (job_id,))
        return jobs[0] if jobs else None

    def attempts(self, job_id: str) -> list[Attempt]:
        return self._db.read_as(ATTEMPTS, SQL["job_attempts"], (job_id,))

    def list_jobs(
        self,
        state: JobState | None = None,
        limit: int = 50,
        after_seq: int | None = None,
        newest_first: bool = False,
        search: str | None = None,
    ) -> list[Job]:
        where: list[str] = []
        params: list[Any] = []
        if state is not None:
            where.append(SQL["list_jobs_in_state"])
            params.append(state.value)
        if after_seq is not None:
            where.append(SQL["list_jobs_before" if newest_first else "list_jobs_after"])
            params.append(after_seq)
        if search:
            pattern = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            pattern += "%"
            where.append(SQL["list_jobs_matching"])
            params.extend((pattern, pattern))
        # Put together from the fixed parts of list_jobs (see queries.sql): one statement per
        # combination of filters, each a range its index serves.
        sql = SQL["list_jobs"]
        if where:
            sql += "\nWHERE " + "\nAND ".join(where)
        sql += "\n" + SQL["list_jobs_newest_first" if newest_first else "list_jobs_oldest_first"]
        params.append(max(0, limit))
        return self._db.read_as(JOBS, sql, params)

    def counts(self) -> dict[JobState, int]:
        rows = self._db.read(SQL["state_counts"])
        found = {JobState(state): n for state, n in rows}
        return {state: found.get(state, 0) for state in STATES}

    def queue_counts(self) -> QueueCounts:
        with self._db.snapshot() as conn:  # one snapshot for both reads
            rows = conn.execute(SQL["state_counts"]).fetchall()
            active = conn.execute(SQL["count_active_workers"]).fetchone()[0]
        found = {JobState(state): n for state, n in rows}
        return QueueCounts({s: found.get(s, 0) for s in STATES}, active)

    def stats(self, now: int, sample: int = 10_000) -> QueueStats:
        result = QueueStats(counts=self.queue_counts())
        result.completed_per_minute, result.failed_per_minute = self.throughput(now)
        last_minute = self._db.read(SQL["outcomes_since"], (now - 60_000,))
        for ok, count in last_minute:
            if ok:
                result.completed_last_minute = count
            else:
                result.failed_last_minute = count
        totals = self._db.read(SQL["attempt_totals"])
        result.attempts_total = sum(n for _, n, _ in totals)
        result.attempts_failed = sum(n for outcome, n, _ in totals if outcome in FAILED_OUTCOMES)
        result.retries = sum(retries for _, _, retries in totals)
        rows = self._db.read(SQL["latest_timings"], (sample,))
        result.sample_size = len(rows)
        result.wait_ms = _summary([max(0, wait) for wait, _ in rows])
        result.run_ms = _summary([run for _, run in rows])
        return result

    def throughput(self, now: int, minutes: int = 15) -> tuple[list[int], list[int]]:
        """Completed and failed attempts in each of the last `minutes` minutes before `now`,
        oldest first, read from counts per 10 s (a slot counts in the minute it starts in)."""
        since = now - minutes * 60_000
        completed = [0] * minutes
        failed = [0] * minutes
        for slot, done, failures in self._db.read(
            SQL["attempt_rates"], (since // RATE_SLOT_MS, now // RATE_SLOT_MS)
        ):
            index = min(max((slot * RATE_SLOT_MS - since) // 60_000, 0), minutes - 1)
            completed[index] += done
            failed[index] += failures
        return completed, failed

    def retry_dead(self, job_ids: Sequence[str] | None, now: int) -> list[str]:
        def body(conn: sqlite3.Connection) -> list[str]:
            if job_ids is None:
                return [row[0] for row in conn.execute(SQL["retry_all_dead"], (now, now))]
            retried: list[str] = []
            for chunk in _chunks(list(dict.fromkeys(job_ids))):
                cursor = conn.execute(with_list("retry_dead_among", len(chunk)), (now, now, *chunk))
                retried.extend(row[0] for row in cursor)
            return retried

        return self._db.write(body, durable=True)

    # -- the engine's protocol ------------------------------------------------------------------
    def exchange(
        self,
        settlements: Sequence[Settlement],
        claimants: Sequence[str],
        pid: int,
        now: int,
        policy: RetryPolicy,
    ) -> Exchange:
        # The hot path of a busy pool: every run that ended since the last call is recorded
        # and every free worker gets its next job, in one transaction (one WAL commit).
        def body(conn: sqlite3.Connection) -> Exchange:
            settled: list[SettleResult] = []
            touched: dict[str, _WorkerTouch] = {}
            for settlement in settlements:
                result = self._settle_one(conn, settlement, policy)
                settled.append(result)
                if result.state is not None:
                    touch = touched.setdefault(settlement.job.worker_id or "", _WorkerTouch())
                    if settlement.outcome is Outcome.COMPLETED:
                        touch.done += 1
                    elif settlement.outcome is not Outcome.CANCELLED:
                        touch.failed += 1
            claimed: dict[str, Job] = {}
            for worker_id in self._active_workers(conn, claimants):
                job = JOBS.first(conn.execute(SQL["claim_next"], (worker_id, pid, now, now, now)))
                if job is None:
                    break
                claimed[worker_id] = job
                touched.setdefault(worker_id, _WorkerTouch()).job = job
            conn.executemany(
                SQL["touch_worker"],
                [
                    (
                        None if touch.job is None else touch.job.id,
                        now,
                        touch.done,
                        touch.failed,
                        "idle" if touch.job is None else "busy",
                        worker_id,
                    )
                    for worker_id, touch in touched.items()
                ],
            )
            return Exchange(settled, claimed)

        return self._db.write(body)

    @staticmethod
    def _active_workers(conn: sqlite3.Connection, worker_ids: Sequence[str]) -> list[str]:
        """The given workers that are still active, in the given order. A worker another pool
        has declared lost must not take work: its jobs would be orphans at once, recovered and
        run again while it still runs them."""
        if not worker_ids:
            return []
        active: set[str] = set()
        for chunk in _chunks(worker_ids):
            active.update(
                row[0]
                for row in conn.execute(with_list("active_workers_among", len(chunk)), tuple(chunk))
            )
        return [worker_id for worker_id in worker_ids if worker_id in active]

    @staticmethod
    def _settle_one(
        conn: sqlite3.Connection, settlement: Settlement, policy: RetryPolicy
    ) -> SettleResult:
        job = settlement.job
        now = settlement.finished_at
        outcome = settlement.outcome
        fence = (job.seq, job.worker_id, job.runs)  # see complete_job in queries.sql
        if outcome is Outcome.COMPLETED:
            row = conn.execute(
                SQL["complete_job"], (now, settlement.exit_code, settlement.error, now, *fence)
            ).fetchone()
            if row is None:
                return SettleResult(None, None)
            state, scheduled_at = JobState.COMPLETED, row[0]
            run_at = scheduled_at
        else:
            row = conn.execute(SQL["job_to_settle"], fence).fetchone()
            if row is None:
                return SettleResult(None, None)
            scheduled_at, attempts, max_retries = row
            step = after_attempt(
                outcome,
                attempts=attempts,
                max_retries=max_retries,
                scheduled_at=scheduled_at,
                now=now,
                policy=policy,
            )
            state, run_at, attempts = step.state, step.run_at, step.attempts
            conn.execute(
                SQL["settle_job"],
                (
                    state.value,
                    run_at,
                    attempts,
                    now,
                    settlement.exit_code,
                    settlement.error,
                    now,
                    job.seq,
                ),
            )
        conn.execute(
            SQL["record_attempt"],
            (
                job.seq,
                job.runs,
                job.worker_id,
                scheduled_at,
                job.claimed_at or now,
                now,
                settlement.exit_code,
                outcome.value,
                settlement.output,
                settlement.error,
            ),
        )
        return SettleResult(state, run_at)

    def has_due_work(self, now: int) -> bool:
        return bool(self._db.read(SQL["has_due_work"], (now,)))

    def wait_for_writers(self) -> None:
        self._db.wait_for_writers()

    def next_run_at(self, after: int) -> int | None:
        rows = self._db.read(SQL["next_run_at"], (after,))
        return rows[0][0] if rows else None

    def recover_orphans(
        self, dead_worker_ids: Sequence[str], policy: RetryPolicy, now: int
    ) -> list[Job]:
        def body(conn: sqlite3.Connection) -> list[Job]:
            for chunk in _chunks(list(dead_worker_ids)):
                conn.execute(with_list("mark_workers_lost", len(chunk)), (now, *chunk))
            recovered: list[Job] = []
            for job in JOBS.all(conn.execute(SQL["orphaned_jobs"])):
                lost = Settlement(
                    job=job,
                    outcome=Outcome.LOST,
                    exit_code=None,
                    output="",
                    error=f"worker {job.worker_id} (pid {job.worker_pid}) was lost mid-job",
                    finished_at=now,
                )
                self._settle_one(conn, lost, policy)
                after = JOBS.first(conn.execute(SQL["job_by_seq"], (job.seq,)))
                assert after is not None  # settled, not deleted
                recovered.append(after)
            return recovered

        return self._db.write(body)

    # -- workers -------------------------------------------------------------------------------
    def register_workers(self, workers: Sequence[Worker]) -> int:
        rows = [
            (
                w.id,
                w.pool_id,
                w.pid,
                w.host,
                w.status.value,
                w.started_at,
                w.last_heartbeat,
                w.stopped_at,
                w.current_job,
                w.jobs_done,
                w.jobs_failed,
            )
            for w in workers
        ]

        def body(conn: sqlite3.Connection) -> int:
            conn.executemany(SQL["register_worker"], rows)
            return _latest_stop_request(conn)

        return self._db.write(body)

    def heartbeat(self, worker_ids: Sequence[str], now: int) -> None:
        def body(conn: sqlite3.Connection) -> None:
            for chunk in _chunks(list(worker_ids)):
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
            return WORKERS.all(conn.execute(SQL["active_workers_by_id"]))

        return self._db.write(body, durable=True)

    def stop_requested_after(self, request_id: int) -> bool:
        rows = self._db.read(SQL["stop_requested_after"], (request_id,))
        return bool(rows)

    def stop_requested_since(self, since: int) -> bool:
        rows = self._db.read(SQL["stop_requested_since"], (since,))
        return bool(rows)


def _latest_stop_request(conn: sqlite3.Connection) -> int:
    return int(conn.execute(SQL["latest_stop_request"]).fetchone()[0])


def _summary(values: list[int]) -> dict[str, float | None]:
    if not values:
        return {"avg": None, "p50": None, "p95": None}
    ordered = sorted(values)

    def pick(fraction: float) -> float:
        return float(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])

    return {"avg": sum(ordered) / len(ordered), "p50": pick(0.50), "p95": pick(0.95)}
