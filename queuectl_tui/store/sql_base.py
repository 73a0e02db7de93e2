"""The Store's bodies that both SQL backends share, written once.

A backend supplies what truly differs: how it runs a write transaction, a read and a
consistent snapshot; its statements (the same names and parameters on each); how it binds a
list of ids (SQLite has no arrays); and the few steps its engine does its own way. Everything
here calls only those."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ..error_groups import ErrorGroup
from ..models import (
    STATES,
    WAITING_STATES,
    Action,
    Attempt,
    AuditEntry,
    Job,
    JobLinks,
    JobSpec,
    JobState,
    Operator,
    OutputChunk,
    QueueInfo,
    StopKind,
    Worker,
    WorkerStatus,
)
from ..query import JobQuery
from ..schedules import Schedule
from . import dependencies, schedule_rows
from .admission import Room, audit_rows, submit_each
from .base import (
    Admission,
    EnqueueResult,
    OutputAppend,
    RetryResult,
    ScheduleSync,
    Store,
    SubmitResult,
)
from .figures import RATE_SLOT_MS, per_minute
from .listing import count_jobs_statement, has_free_text, list_jobs_statement
from .output_rows import chunk_rows, forget_params
from .rows import (
    ATTEMPTS,
    AUDIT,
    JOBS,
    OUTPUT_CHUNKS,
    WORKERS,
    Params,
    RowMap,
    audit_row,
    worker_values,
)
from .schedule_rows import SCHEDULES

T = TypeVar("T")
D = TypeVar("D")
Conn = Any  # a sqlite3 or psycopg connection: both execute(sql, params)


class SqlStore(Store):
    """A Store over SQL statements. Subclasses set `SQL` and `SCHEDULE_SQL` and implement the
    abstract steps below."""

    SQL: Mapping[str, str]
    SCHEDULE_SQL: Mapping[str, str]
    # Whether workers' rows (registration, status, pruning) are committed durably. A pool whose
    # workers' rows were lost would claim nothing more, so they are where the database can be
    # lost while the pools live on (a server); not where only the machine's crash loses a
    # commit, since that takes the pools with it (a file).
    DURABLE_WORKER_ROWS = False

    # -- what a backend supplies -----------------------------------------------------------------
    @abstractmethod
    def _write(self, body: Callable[[Conn], T], durable: bool, gives_work: bool = True) -> T:
        """`body(conn)` in one write transaction. `durable`: committed to disk before this
        returns; the engine's bookkeeping is not (its loss at most runs a job again).
        `gives_work` False: it can give no worker anything to do, so idle pools need not be
        told at once (SQLite: it does not ring the queue's bell)."""

    @abstractmethod
    def _read(self, sql: str, params: Params | None = None) -> list[Any]:
        """The rows of one read statement."""

    @abstractmethod
    def _read_as(self, rows: RowMap[Any], sql: str, params: Params | None = None) -> list[Any]:
        """The rows of one read statement, as `rows` makes them."""

    @abstractmethod
    def _snapshot(self) -> AbstractContextManager[Conn]:
        """A connection inside one read-only transaction: its reads see one state."""

    @abstractmethod
    def _rows_among(
        self, conn: Conn, name: str, ids: Sequence[str], *params: object
    ) -> list[tuple[Any, ...]]:
        """The rows of statement `name` over `ids` (bound after `params`), however many."""

    @abstractmethod
    def _links(self, conn: Conn) -> dependencies.LinkStatements:
        """The statements store/dependencies.py runs, on `conn`."""

    @abstractmethod
    def _insert_one(
        self, conn: Conn, spec: JobSpec, default_max_retries: int, now: int
    ) -> EnqueueResult:
        """Insert one job inside the caller's transaction."""

    @abstractmethod
    def _matching(self, texts: list[str]) -> tuple[list[str], list[Any]]:
        """The conditions that find `texts` through the backend's text index."""

    @abstractmethod
    def _queue_depths(self, conn: Conn) -> list[tuple[str, str, int]]:
        """(queue, state, jobs) of every queue with jobs, in one snapshot."""

    @abstractmethod
    def _oldest_due(self, conn: Conn, queue: str, now: int) -> int | None:
        """When the job of `queue` that has waited longest since it was due became due."""

    def _nameable(self, text: str) -> bool:
        """Whether any stored name (job id, schedule, pool) could be `text`."""
        return True

    def _one_read(self) -> AbstractContextManager[Conn]:
        """A connection for a read that needs no snapshot of its own: one statement, or one
        statement a chunk of ids at a time. The snapshot, unless the backend has a lighter way."""
        return self._snapshot()

    def _serialize(self, conn: Conn, lock: str) -> None:
        """Make writers that take the same `lock` (a statement's name) wait for each other,
        where the backend's transactions do not already (SQLite has one writer at a time)."""

    # -- jobs ------------------------------------------------------------------------------------
    def submit(
        self,
        specs: Sequence[JobSpec],
        default_max_retries: int,
        now: int,
        admission: Admission,
        submitters: Sequence[Operator] = (),
    ) -> list[SubmitResult]:
        sql = self.SQL

        def body(conn: Conn) -> list[SubmitResult]:
            room = Room(
                admission,
                waiting=lambda: count_of(conn, sql["waiting_depth"]),
                waiting_of_type=lambda kind: count_of(
                    conn, sql["waiting_of_type"], {"job_type": kind}
                ),
                queues=lambda: [name for (name,) in conn.execute(sql["existing_queues"])],
            )
            results, rejected = submit_each(
                specs,
                room,
                known=lambda key: JOBS.first(conn, sql["job_by_idempotency_key"], {"key": key}),
                insert=lambda spec: self._insert_one(conn, spec, default_max_retries, now),
            )
            if rejected:
                conn.execute(sql["add_to_counter"], {"name": "admission_rejected", "n": rejected})
            _execute_many(conn, sql["record_action"], audit_rows(results, submitters, now))
            return results

        return self._write(body, durable=True)

    def get(self, job_id: str) -> Job | None:
        if not self._nameable(job_id):
            return None
        found: list[Job] = self._read_as(JOBS, self.SQL["job_by_id"], {"id": job_id})
        return found[0] if found else None

    def job_links(self, job_id: str, children: int = 1000) -> JobLinks:
        if not self._nameable(job_id):
            return JobLinks()
        with self._snapshot() as conn:
            parents = conn.execute(self.SQL["job_parents_of"], {"id": job_id}).fetchall()
            below = conn.execute(
                self.SQL["job_children_of"], {"id": job_id, "limit": children}
            ).fetchall()
        return dependencies.links_from_rows(parents, below)

    def attempts(self, job_id: str) -> list[Attempt]:
        if not self._nameable(job_id):
            return []
        return self._read_as(ATTEMPTS, self.SQL["job_attempts"], {"id": job_id})

    def append_output(self, appends: Sequence[OutputAppend]) -> None:
        if not appends:
            return

        def body(conn: Conn) -> None:
            for append in appends:
                _execute_many(conn, self.SQL["append_output"], chunk_rows(append))
                forget = forget_params(append)
                if forget is not None:
                    conn.execute(self.SQL["forget_output"], forget)

        # Not durable: a crash loses at most the last pieces of output of a run it ends.
        self._write(body, durable=False, gives_work=False)

    def output_chunks(
        self, job_id: str, run: int, after_seq: int = -1, limit: int = 1000
    ) -> list[OutputChunk]:
        if not self._nameable(job_id):
            return []
        params = {"id": job_id, "run": run, "after_seq": after_seq, "limit": limit}
        return self._read_as(OUTPUT_CHUNKS, self.SQL["output_chunks"], params)

    def error_groups(self, state: JobState, limit: int = 100) -> list[ErrorGroup]:
        rows = self._read(self.SQL["error_groups"], {"state": state.value, "limit": limit})
        return [ErrorGroup(*row) for row in rows]

    def error_group_ids(self, state: JobState, fingerprint: str) -> list[str]:
        if not self._nameable(fingerprint):
            return []
        params = {"state": state.value, "fingerprint": fingerprint}
        rows = self._read(self.SQL["error_group_ids"], params)
        return [row[0] for row in rows]

    def list_jobs(
        self,
        state: JobState | None = None,
        *,
        limit: int = 50,
        after_seq: int | None = None,
        newest_first: bool = False,
        search: str | None = None,
        queue: str | None = None,
        query: JobQuery | None = None,
        by_end: bool = False,
        after_end: int | None = None,
    ) -> list[Job]:
        index = self._matching if has_free_text(search, query) and self.text_index() else None
        sql, params = list_jobs_statement(
            self.SQL,
            state=state,
            limit=limit,
            after_seq=after_seq,
            newest_first=newest_first,
            search=search,
            queue=queue,
            query=query,
            by_end=by_end,
            text_index=index,
            after_end=after_end,
        )
        return self._read_as(JOBS, sql, params)

    def count_jobs(self, query: JobQuery) -> int:
        index = self._matching if has_free_text(None, query) and self.text_index() else None
        return int(self._read(*count_jobs_statement(self.SQL, query, index))[0][0])

    def throughput(
        self, now: int, minutes: int = 15, queue: str | None = None
    ) -> tuple[list[int], list[int]]:
        since = now - minutes * 60_000
        slots = self._read(
            self.SQL["attempt_rates"],
            {"first": since // RATE_SLOT_MS, "last": now // RATE_SLOT_MS, "queue": queue},
        )
        return per_minute(slots, now, minutes)

    def text_index(self) -> bool:
        return bool(self._read(self.SQL["text_index_present"])[0][0])

    # -- an operator's control -------------------------------------------------------------------
    def job_states(self, job_ids: Sequence[str]) -> dict[str, JobState]:
        with self._one_read() as conn:
            rows = self._rows_among(conn, "states_among", self._unique(job_ids))
        return {job_id: JobState(state) for job_id, state in rows}

    def cancel_requested(self, job_ids: Sequence[str]) -> list[str]:
        ids = self._unique(job_ids)
        with self._one_read() as conn:  # a busy pool asks several times a second
            return in_order(
                first_column(self._rows_among(conn, "cancel_requested_among", ids)), ids
            )

    def retry_dead(
        self, job_ids: Sequence[str] | None, now: int, action: Action | None = None
    ) -> list[str]:
        def body(conn: Conn) -> list[str]:
            if job_ids is None:
                retried = first_column(
                    conn.execute(self.SQL["retry_all_dead"], {"now": now}).fetchall()
                )
            else:
                ids = self._unique(job_ids)
                rows = self._rows_among(conn, "retry_dead_among", ids, now, now)
                retried = in_order(first_column(rows), ids)
            dependencies.jobs_retried(self._links(conn), retried, now)
            self._record(conn, action, len(retried), now)
            return retried

        return self._write(body, durable=True)

    def retry(self, job_ids: Sequence[str], now: int, action: Action | None) -> RetryResult:
        def body(conn: Conn) -> RetryResult:
            links = self._links(conn)
            ids = self._unique(job_ids)
            blocked = dependencies.blocked_among(links, ids)
            free = [job_id for job_id in ids if job_id not in blocked]
            fresh = first_column(self._rows_among(conn, "retry_finished_among", free, now, now))
            ready = first_column(self._rows_among(conn, "retry_now_among", free, now, now))
            dependencies.jobs_retried(links, fresh, now)
            if blocked:  # some may be back already, with a parent retried in this same call
                still = dependencies.blocked_among(links, list(blocked))
                fresh += [job_id for job_id in blocked if job_id not in still]
                blocked = still
            self._record(conn, action, len(fresh) + len(ready), now)
            return RetryResult(in_order(fresh, ids), in_order(ready, ids), blocked)

        return self._write(body, durable=True)

    def delete(
        self,
        job_ids: Sequence[str],
        now: int,
        action: Action | None,
        state: JobState | None = None,
    ) -> list[str]:
        def body(conn: Conn) -> list[str]:
            ids = self._unique(job_ids)
            if state is None:
                deleted = first_column(self._rows_among(conn, "delete_among", ids))
            else:
                rows = self._rows_among(conn, "delete_in_state_among", ids, state.value)
                deleted = first_column(rows)
            dependencies.jobs_deleted(self._links(conn), deleted, now)
            self._record(conn, action, len(deleted), now)
            return in_order(deleted, ids)

        return self._write(body, durable=True)

    def count_prunable(self, state: JobState, before: int) -> int:
        params = {"state": state.value, "before": before}
        return int(self._read(self.SQL["count_prunable"], params)[0][0])

    def record_action(self, action: Action, touched: int, now: int) -> None:
        self._write(lambda conn: self._record(conn, action, touched, now), durable=True)

    def actions(self, limit: int = 50, before_id: int | None = None) -> list[AuditEntry]:
        params = {"before": before_id, "limit": limit}
        return self._read_as(AUDIT, self.SQL["list_actions"], params)

    def _record(self, conn: Conn, action: Action | None, touched: int, now: int) -> None:
        """The audit line of `action`, in the caller's transaction (None: the caller records
        it once the whole action is done)."""
        if action is None or not action.recorded_for(touched):
            return
        conn.execute(self.SQL["record_action"], audit_row(action, touched, now))

    def _unique(self, ids: Sequence[str]) -> list[str]:
        """The ids once each, in the order given, without those no job can have."""
        return [job_id for job_id in dict.fromkeys(ids) if self._nameable(job_id)]

    # -- queues ----------------------------------------------------------------------------------
    def queues(self, now: int) -> list[QueueInfo]:
        with self._snapshot() as conn:
            settings = {
                name: (bool(paused), max_running)
                for name, paused, max_running in conn.execute(self.SQL["queue_settings"])
            }
            by_queue: dict[str, dict[JobState, int]] = {name: {} for name in settings}
            for name, state, n in self._queue_depths(conn):
                by_queue.setdefault(name, {})[JobState(state)] = n
            found = []
            for name in sorted(by_queue):
                counts = by_queue[name]
                waiting = sum(counts.get(state, 0) for state in WAITING_STATES)
                paused, max_running = settings.get(name, (False, None))
                found.append(
                    QueueInfo(
                        name,
                        waiting,
                        counts.get(JobState.PROCESSING, 0),
                        paused,
                        max_running,
                        self._oldest_due(conn, name, now) if waiting else None,
                        {state: counts.get(state, 0) for state in STATES},
                    )
                )
            return found

    def set_queue_paused(self, name: str, paused: bool, now: int, action: Action) -> None:
        self._set_queue("set_queue_paused", name, paused, now, action)

    def set_queue_limit(self, name: str, limit: int | None, now: int, action: Action) -> None:
        self._set_queue("set_queue_limit", name, limit, now, action)

    def _set_queue(
        self, statement: str, name: str, value: object, now: int, action: Action
    ) -> None:
        def body(conn: Conn) -> None:
            conn.execute(self.SQL[statement], {"name": name, "value": value, "now": now})
            self._record(conn, action, 1, now)

        self._write(body, durable=True)

    # -- workers ---------------------------------------------------------------------------------
    def register_workers(self, workers: Sequence[Worker]) -> int:
        rows = [worker_values(worker) for worker in workers]

        def body(conn: Conn) -> int:
            self._serialize(conn, "stop_lock")  # a stop asked meanwhile is seen by its number
            _execute_many(conn, self.SQL["register_worker"], rows)
            row = conn.execute(self.SQL["latest_stop_request"]).fetchone()
            return int(row[0]) if row else 0

        return self._write(body, durable=self.DURABLE_WORKER_ROWS)

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
        params = {
            "status": status.value,
            "current_job": current_job,
            "now": now,
            "ended": ended,
            "done": done,
            "failed": failed,
            "id": worker_id,
        }
        write = self.SQL["set_worker_status"]
        self._write(lambda conn: conn.execute(write, params), self.DURABLE_WORKER_ROWS)

    def list_workers(self, active_only: bool = False) -> list[Worker]:
        return self._read_as(
            WORKERS, self.SQL["list_active_workers" if active_only else "list_workers"]
        )

    def prune_workers(self, stopped_before: int) -> int:
        def body(conn: Conn) -> int:
            return int(conn.execute(self.SQL["prune_workers"], {"before": stopped_before}).rowcount)

        return self._write(body, durable=self.DURABLE_WORKER_ROWS)

    def request_stop(
        self, now: int, pool_id: str | None = None, forced: bool = False
    ) -> list[Worker]:
        if pool_id is not None and not self._nameable(pool_id):
            return []

        def body(conn: Conn) -> list[Worker]:
            self._serialize(conn, "stop_lock")
            params = {"now": now, "pool_id": pool_id, "forced": int(forced)}
            conn.execute(self.SQL["request_stop"], params)
            return WORKERS.all(conn, self.SQL["active_workers_by_id"])

        active = self._write(body, durable=True)
        return [worker for worker in active if pool_id in (None, worker.pool_id)]

    def stop_requested_after(self, request_id: int, pool_id: str) -> StopKind | None:
        params = {"request_id": request_id, "pool_id": pool_id}
        [(forced,)] = self._read(self.SQL["stop_requested_after"], params)
        return StopKind.of(forced)

    def stop_requested_since(self, since: int, pool_id: str) -> StopKind | None:
        params = {"since": since, "pool_id": pool_id}
        [(forced,)] = self._read(self.SQL["stop_requested_since"], params)
        return StopKind.of(forced)

    # -- schedules -------------------------------------------------------------------------------
    def schedules(self) -> list[Schedule]:
        return self._read_as(SCHEDULES, self.SCHEDULE_SQL["schedules"])

    def get_schedule(self, name: str) -> Schedule | None:
        if not self._nameable(name):
            return None
        found: list[Schedule] = self._read_as(
            SCHEDULES, self.SCHEDULE_SQL["schedule_by_name"], {"name": name}
        )
        return found[0] if found else None

    def add_schedule(self, schedule: Schedule, action: Action | None) -> None:
        def body(conn: Conn) -> None:
            record = self._recorder(conn, schedule.created_at)
            schedule_rows.add(conn, self.SCHEDULE_SQL, schedule, action, record)

        self._write(body, durable=True)

    def remove_schedule(self, name: str, now: int, action: Action | None) -> bool:
        if not self._nameable(name):
            return False

        def body(conn: Conn) -> bool:
            gone = conn.execute(self.SCHEDULE_SQL["delete_schedule"], {"name": name}).rowcount == 1
            if gone:
                self._record(conn, action, 1, now)
            return bool(gone)

        return self._write(body, durable=True)

    def set_schedule_paused(
        self, name: str, paused: bool, next_at: int | None, now: int, action: Action | None
    ) -> bool:
        if not self._nameable(name):
            return False

        def body(conn: Conn) -> bool:
            if paused:
                params: dict[str, object] = {"now": now, "name": name}
                cursor = conn.execute(self.SCHEDULE_SQL["pause_schedule"], params)
            else:
                params = {"next_at": next_at, "now": now, "name": name}
                cursor = conn.execute(self.SCHEDULE_SQL["resume_schedule"], params)
            if cursor.rowcount == 1:
                self._record(conn, action, 1, now)
            return bool(cursor.rowcount == 1)

        return self._write(body, durable=True)

    def fire_schedule(
        self,
        name: str,
        expected: int,
        next_at: int | None,
        specs: Sequence[JobSpec],
        default_max_retries: int,
        now: int,
    ) -> list[Job] | None:
        def body(conn: Conn) -> list[Job] | None:
            def insert(spec: JobSpec) -> EnqueueResult:
                return self._insert_one(conn, spec, default_max_retries, now)

            return schedule_rows.fire(
                conn, self.SCHEDULE_SQL, insert, name, expected, next_at, specs, now
            )

        # Not durable, as the engine's bookkeeping: a tick lost with its commit fires again.
        return self._write(body, durable=False)

    def run_schedule(
        self,
        name: str,
        spec: JobSpec,
        default_max_retries: int,
        now: int,
        action: Action | None,
    ) -> Job | None:
        if not self._nameable(name):
            return None

        def body(conn: Conn) -> Job | None:
            def insert(job: JobSpec) -> EnqueueResult:
                return self._insert_one(conn, job, default_max_retries, now)

            record = self._recorder(conn, now)
            return schedule_rows.run_now(
                conn, self.SCHEDULE_SQL, insert, name, spec, now, action, record
            )

        return self._write(body, durable=True)

    def sync_schedules(
        self, declared: Sequence[Schedule], now: int, action: Action | None
    ) -> ScheduleSync:
        def body(conn: Conn) -> ScheduleSync:
            self._serialize(conn, "schedules_lock")
            record = self._recorder(conn, now)
            return schedule_rows.sync(conn, self.SCHEDULE_SQL, declared, action, record)

        return self._write(body, durable=True)

    def _recorder(self, conn: Conn, now: int) -> schedule_rows.Record:
        return lambda action, touched: self._record(conn, action, touched, now)


def count_of(conn: Conn, sql: str, params: Params = ()) -> int:
    """The number a counting statement gives (0 for no row)."""
    row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row else 0


def _execute_many(conn: Conn, sql: str, rows: Sequence[Params]) -> None:
    if rows:  # one round trip for them all, where the driver can
        cursor = conn.cursor()
        try:
            cursor.executemany(sql, rows)
        finally:
            cursor.close()


def first_column(rows: Sequence[Sequence[Any]]) -> list[str]:
    return [row[0] for row in rows]


def in_order(found: list[str], asked: list[str]) -> list[str]:
    """`found` in the order the ids were asked for."""
    present = set(found)
    return [job_id for job_id in asked if job_id in present]
