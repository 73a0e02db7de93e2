"""PostgresStore: the Store interface on PostgreSQL, for pools on many hosts sharing one queue.

Each call is one transaction on a connection borrowed from the process's pool (database.py).
Times are the database's clock (`now()`), so hosts whose clocks disagree still agree on when
a job is due and when a worker was last heard from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from ...error_groups import ErrorGroup
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
    Outcome,
    OutputChunk,
    QueueCounts,
    QueueInfo,
    Worker,
    WorkerStatus,
)
from ...query import JobQuery
from ..admission import Room, audit_rows, insert_values, submit_each
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
    StoreError,
    SubmitResult,
)
from ..figures import RATE_SLOT_MS, attempt_figures, per_minute, snapshot
from ..listing import count_jobs_statement, list_jobs_statement
from ..output_rows import chunk_rows, forget_params
from ..rows import ATTEMPTS, AUDIT, JOBS, OUTPUT_CHUNKS, WORKERS, worker_values
from . import bulk, claims
from .database import DEFAULT_WAIT, Database, borrow, give_back
from .feed import ListenFeed
from .statements import SQL
from .url import parse

Conn = psycopg.Connection[Any]

# Delta rows a count may add up before it folds them into the totals (see migration 1).
FOLD_AFTER = 500


class PostgresStore(Store):
    def __init__(
        self, location: str, lock_wait: float | None = None, planned_once: bool = False
    ) -> None:
        """Open the queue at the PostgreSQL URL `location`, creating and migrating its schema
        if needed. `lock_wait`: seconds a call waits for a connection before giving up;
        `planned_once`: see StoreOptions."""
        self.location = location
        self._target = parse(location)
        self._wait = DEFAULT_WAIT if lock_wait is None else max(0.1, lock_wait)
        self._fold_soon = False  # a count added up many deltas: fold them after answering
        self._limits_seen = False  # the last exchange found a queue with a limit open to it
        # Workers whose claims may have been committed without the answer reaching us (an
        # exchange failed with its outcome unknown): handed back by the next exchange.
        self._unsure: set[str] = set()
        self._policy: RetryPolicy | None = None  # the last exchange's, to hand back with
        self._db: Database | None = borrow(self._target, planned_once)
        try:
            self._db.ensure_schema(self._wait)
        except BaseException:
            self.close()
            raise

    @property
    def db(self) -> Database:
        if self._db is None:
            raise RuntimeError("the store is closed")
        return self._db

    def _run(self, body: Any, durable: bool = True) -> Any:
        return self.db.run(body, durable=durable, wait=self._wait)

    def _read(self, sql: str, params: Any = None) -> list[Any]:
        return self.db.read(sql, params, wait=self._wait)

    def close(self) -> None:
        if self._db is not None:
            if self._unsure:
                self._hand_back_unsure()
            give_back(self._db)
            self._db = None

    def _hand_back_unsure(self) -> None:
        """A pool that stops right after an exchange whose answer was lost hands back what it
        may have claimed unseen, so that no job waits for recovery. If the server cannot be
        reached, recovery takes them (the workers, stopped, own nothing)."""
        unsure, policy = sorted(self._unsure), self._policy
        if policy is None:
            return
        try:
            now = self.db.now()
            self._run(lambda conn: claims.hand_back_unseen(conn, unsure, [], now, policy))
        except StoreError:
            return
        self._unsure.clear()

    def now(self) -> int:
        return self.db.now()

    def change_feed(self, mode: str = "auto") -> ChangeFeed:
        conninfo, options = self.db.listen_conninfo()
        return ListenFeed(conninfo, options, self._target.schema, self._target.shown)

    def change_token(self) -> int:
        return int(self._read(SQL["change_token"])[0][0])

    # -- jobs --------------------------------------------------------------------------------
    def enqueue(self, spec: JobSpec, default_max_retries: int, now: int) -> EnqueueResult:
        # The insert is a statement on its own, its own transaction (one round trip, durable
        # when it returns); only when it inserted nothing is the reason looked up.
        with self.db.for_one_statement(self._wait) as conn:
            return _insert_one(conn, spec, default_max_retries, now)

    def submit(
        self,
        specs: Sequence[JobSpec],
        default_max_retries: int,
        now: int,
        admission: Admission,
        submitters: Sequence[Operator] = (),
    ) -> list[SubmitResult]:
        return self._run(  # type: ignore[no-any-return]
            lambda conn: _submit(conn, specs, default_max_retries, now, admission, submitters)
        )

    def enqueue_batches(
        self, batches: Iterable[Sequence[JobSpec]], default_max_retries: int, now: int
    ) -> BulkEnqueueResult:
        result: BulkEnqueueResult = self._run(
            lambda conn: bulk.insert_batches(conn, batches, default_max_retries, now)
        )
        self._fold()
        return result

    def get(self, job_id: str) -> Job | None:
        if not _nameable(job_id):
            return None
        with self.db.for_one_statement(self._wait) as conn:
            return JOBS.first(conn, SQL["job_by_id"], (job_id,))

    def attempts(self, job_id: str) -> list[Attempt]:
        if not _nameable(job_id):
            return []
        with self.db.for_one_statement(self._wait) as conn:
            return ATTEMPTS.all(conn, SQL["job_attempts"], (job_id,))

    def append_output(self, appends: Sequence[OutputAppend]) -> None:
        if not appends:
            return

        def body(conn: Conn) -> None:
            with conn.cursor() as cursor:
                for append in appends:
                    cursor.executemany(SQL["append_output"], chunk_rows(append))
                    forget = forget_params(append)
                    if forget is not None:
                        cursor.execute(SQL["forget_output"], forget)

        self._run(body, durable=False)

    def output_chunks(
        self, job_id: str, run: int, after_seq: int = -1, limit: int = 1000
    ) -> list[OutputChunk]:
        if not _nameable(job_id):
            return []
        with self.db.for_one_statement(self._wait) as conn:
            return OUTPUT_CHUNKS.all(conn, SQL["output_chunks"], (job_id, run, after_seq, limit))

    def error_groups(self, state: JobState, limit: int = 100) -> list[ErrorGroup]:
        rows = self._read(SQL["error_groups"], (state.value, limit))
        return [ErrorGroup(*row) for row in rows]

    def error_group_ids(self, state: JobState, fingerprint: str) -> list[str]:
        if not _nameable(fingerprint):
            return []
        return [row[0] for row in self._read(SQL["error_group_ids"], (state.value, fingerprint))]

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
        with self.db.for_one_statement(self._wait) as conn:
            return JOBS.all(conn, sql, params)

    def count_jobs(self, query: JobQuery) -> int:
        return int(self._read(*count_jobs_statement(SQL, query))[0][0])

    def counts(self, queue: str | None = None) -> dict[JobState, int]:
        with self.db.for_one_statement(self._wait) as conn:
            counts = self._counts(conn, queue)
        self._fold_if_due()
        return counts

    def _counts(self, conn: Conn, queue: str | None) -> dict[JobState, int]:
        found: Counter[JobState] = Counter()
        deltas = 0
        for _, state, n, delta_rows in conn.execute(SQL["job_counts"], {"queue": queue}):
            found[JobState(state)] += n
            deltas += delta_rows
        if deltas > FOLD_AFTER:
            # Many enqueues and no pool folding them (it folds as it heartbeats): this
            # reader does, once it has answered.
            self._fold_soon = True
        return {state: found.get(state, 0) for state in STATES}

    def queue_counts(self, queue: str | None = None) -> QueueCounts:
        with self.db.connection(self._wait) as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            counts = self._counts(conn, queue)
            active = conn.execute(SQL["count_active_workers"]).fetchone()
        self._fold_if_due()
        return QueueCounts(counts, int(active[0]) if active else 0)

    def _fold_if_due(self) -> None:
        if self._fold_soon:
            self._fold_soon = False
            self._fold()

    def _fold(self) -> None:
        """Move the counters' deltas into their totals, unless another store is at it."""
        self._read(SQL["fold"])

    def stats(self, now: int, sample: int = 10_000, queue: str | None = None) -> QueueStats:
        result = QueueStats(counts=self.queue_counts(queue), queue=queue)
        result.completed_per_minute, result.failed_per_minute = self.throughput(now, queue=queue)
        with self.db.connection(self._wait) as conn:
            last_minute = conn.execute(
                SQL["outcomes_since"], {"since": now - 60_000, "queue": queue}
            ).fetchall()
            rows = conn.execute(SQL["latest_timings"], {"queue": queue, "limit": sample}).fetchall()
            totals = conn.execute(SQL["attempt_totals"], {"queue": queue}).fetchall()
        attempt_figures(result, last_minute, totals, rows)
        return result

    def throughput(
        self, now: int, minutes: int = 15, queue: str | None = None
    ) -> tuple[list[int], list[int]]:
        since = now - minutes * 60_000
        slots = self._read(
            SQL["attempt_rates"],
            {"first": since // RATE_SLOT_MS, "last": now // RATE_SLOT_MS, "queue": queue},
        )
        return per_minute(slots, now, minutes)

    def metrics(self, now: int) -> MetricsSnapshot:
        with self.db.connection(self._wait) as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return self._metrics(conn, now)

    def _metrics(self, conn: Conn, now: int) -> MetricsSnapshot:
        jobs = [
            (q, state, n) for q, state, n, _ in conn.execute(SQL["job_counts"], {"queue": None})
        ]
        waiting = sorted({q for q, state, n in jobs if n and JobState(state) in WAITING_STATES})
        due = [since for name in waiting if (since := _oldest_due(conn, name, now)) is not None]
        return snapshot(
            jobs=jobs,
            workers=conn.execute(SQL["metrics_worker_statuses"]).fetchall(),
            attempt_totals=conn.execute(SQL["metrics_attempt_totals"]).fetchall(),
            counters=dict(conn.execute(SQL["metrics_counters"]).fetchall()),
            bounds=tuple(le for (le,) in conn.execute(SQL["metrics_histogram_bounds"])),
            buckets=conn.execute(SQL["metrics_histograms"]).fetchall(),
            oldest_waiting_ms=max(0, now - min(due)) if due else None,
            configured_queues=[name for name, _, _ in conn.execute(SQL["queue_settings"])],
        )

    def retry_dead(
        self, job_ids: Sequence[str] | None, now: int, action: Action | None = None
    ) -> list[str]:
        def body(conn: Conn) -> list[str]:
            if job_ids is None:
                retried = _ids(conn, SQL["retry_all_dead"], (now, now))
            else:
                retried = _ids(conn, SQL["retry_dead_among"], (now, now, _unique(job_ids)))
            _record(conn, action, len(retried), now)
            return retried

        return self._run(body)  # type: ignore[no-any-return]

    # -- an operator's control -------------------------------------------------------------------
    def job_states(self, job_ids: Sequence[str]) -> dict[str, JobState]:
        rows = self._read(SQL["states_among"], (_unique(job_ids),))
        return {job_id: JobState(state) for job_id, state in rows}

    def cancel(self, job_ids: Sequence[str], now: int, action: Action | None) -> CancelResult:
        def body(conn: Conn) -> CancelResult:
            ids = _unique(job_ids)
            rows = conn.execute(SQL["cancel_among"], {"now": now, "ids": ids}).fetchall()
            cancelled = [job_id for job_id, state in rows if state == "cancelled"]
            requested = [job_id for job_id, state in rows if state == "processing"]
            _record(conn, action, len(cancelled) + len(requested), now)
            return CancelResult(_in_order(cancelled, ids), _in_order(requested, ids))

        return self._run(body)  # type: ignore[no-any-return]

    def cancel_requested(self, job_ids: Sequence[str]) -> list[str]:
        ids = _unique(job_ids)
        return _in_order([row[0] for row in self._read(SQL["cancel_requested_among"], (ids,))], ids)

    def retry(self, job_ids: Sequence[str], now: int, action: Action | None) -> RetryResult:
        def body(conn: Conn) -> RetryResult:
            ids = _unique(job_ids)
            fresh = _ids(conn, SQL["retry_finished_among"], (now, now, ids))
            ready = _ids(conn, SQL["retry_now_among"], (now, now, ids))
            _record(conn, action, len(fresh) + len(ready), now)
            return RetryResult(_in_order(fresh, ids), _in_order(ready, ids))

        return self._run(body)  # type: ignore[no-any-return]

    def delete(
        self,
        job_ids: Sequence[str],
        now: int,
        action: Action | None,
        state: JobState | None = None,
    ) -> list[str]:
        def body(conn: Conn) -> list[str]:
            ids = _unique(job_ids)
            if state is None:
                deleted = _ids(conn, SQL["delete_among"], (ids,))
            else:
                deleted = _ids(conn, SQL["delete_in_state_among"], (state.value, ids))
            _record(conn, action, len(deleted), now)
            return _in_order(deleted, ids)

        return self._run(body)  # type: ignore[no-any-return]

    def prune(self, state: JobState, before: int, limit: int) -> int:
        def body(conn: Conn) -> int:
            return conn.execute(SQL["prune_batch"], (state.value, before, max(0, limit))).rowcount

        return self._run(body)  # type: ignore[no-any-return]

    def count_prunable(self, state: JobState, before: int) -> int:
        return int(self._read(SQL["count_prunable"], (state.value, before))[0][0])

    def record_action(self, action: Action, touched: int, now: int) -> None:
        self._run(lambda conn: _record(conn, action, touched, now))

    def actions(self, limit: int = 50, before_id: int | None = None) -> list[AuditEntry]:
        with self.db.for_one_statement(self._wait) as conn:
            return AUDIT.all(conn, SQL["list_actions"], {"before": before_id, "limit": limit})

    # -- queues ----------------------------------------------------------------------------------
    def queues(self, now: int) -> list[QueueInfo]:
        with self.db.connection(self._wait) as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            settings = {
                name: (bool(paused), max_running)
                for name, paused, max_running in conn.execute(SQL["queue_settings"])
            }
            by_queue: dict[str, dict[JobState, int]] = {name: {} for name in settings}
            for name, state, n, _ in conn.execute(SQL["job_counts"], {"queue": None}):
                if n > 0:
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
                        _oldest_due(conn, name, now) if waiting else None,
                        {state: counts.get(state, 0) for state in STATES},
                    )
                )
            return found

    def set_queue_paused(self, name: str, paused: bool, now: int, action: Action) -> None:
        def body(conn: Conn) -> None:
            conn.execute(SQL["set_queue_paused"], (name, paused, now))
            _record(conn, action, 1, now)

        self._run(body)

    def set_queue_limit(self, name: str, limit: int | None, now: int, action: Action) -> None:
        def body(conn: Conn) -> None:
            conn.execute(SQL["set_queue_limit"], (name, limit, now))
            _record(conn, action, 1, now)

        self._run(body)

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
        self._policy = policy
        try:
            done = self._exchange(settlements, claimants, pid, now, policy, queues)
        except BaseException:
            # The connection may have dropped after the server committed: what this exchange
            # claimed is then the store's, unknown to the pool. The next one hands it back
            # (nothing, if it never reached the server).
            self._unsure.update(claimants)
            raise
        self._unsure.clear()
        return done

    def _exchange(
        self,
        settlements: Sequence[Settlement],
        claimants: Sequence[str],
        pid: int,
        now: int,
        policy: RetryPolicy,
        queues: Sequence[str] | None,
    ) -> Exchange:
        unsure = sorted(self._unsure)
        # Not durable, as the engine's bookkeeping is: the statement itself says so.
        if (
            unsure
            or self._limits_seen
            or any(s.outcome is not Outcome.COMPLETED for s in settlements)
        ):
            # Runs settled by the lifecycle's rules, claims under a queue's limit, or claims
            # that may have committed unseen to hand back first: several statements, in one
            # transaction.
            def body(conn: Conn) -> tuple[Exchange, bool]:
                if unsure:
                    settling = [s.job.seq for s in settlements]
                    claims.hand_back_unseen(conn, unsure, settling, now, policy)
                return claims.exchange(conn, settlements, claimants, pid, now, policy, queues)

            done: Exchange
            done, self._limits_seen = self._run(body)
            return done
        # The hot path: one statement, a transaction of its own (one round trip).
        with self.db.for_one_statement(self._wait) as conn:
            done, limited = claims.exchange(
                conn, settlements, claimants, pid, now, policy, queues, under_limits=False
            )
        self._limits_seen = limited
        if not (limited and claimants):
            return done

        def claim_limited(conn: Conn) -> dict[str, Job]:
            return claims.claim_under_limits(conn, claimants, pid, now, queues)

        return Exchange(done.settled, self._run(claim_limited))

    def has_due_work(self, now: int, queues: Sequence[str] | None = None) -> bool:
        served = None if queues is None else list(queues)
        return bool(self._read(SQL["has_due_work"], {"now": now, "served": served})[0][0])

    def next_run_at(self, after: int) -> int | None:
        found = self._read(SQL["next_run_at"], {"after": after})[0][0]
        return None if found is None else int(found)

    def recover_orphans(
        self, dead_worker_ids: Sequence[str], policy: RetryPolicy, now: int
    ) -> list[Job]:
        def body(conn: Conn) -> list[Job]:
            return claims.recover_orphans(conn, dead_worker_ids, policy, now)

        return self._run(body)  # type: ignore[no-any-return]

    # -- workers -------------------------------------------------------------------------------
    def register_workers(self, workers: Sequence[Worker]) -> int:
        rows = [worker_values(worker) for worker in workers]

        def body(conn: Conn) -> int:
            conn.execute(SQL["stop_lock"])
            with conn.cursor() as cursor:
                cursor.executemany(SQL["register_worker"], rows)
            row = conn.execute(SQL["latest_stop_request"]).fetchone()
            return int(row[0]) if row else 0

        return self._run(body)  # type: ignore[no-any-return]

    def heartbeat(self, worker_ids: Sequence[str], now: int) -> None:
        def body(conn: Conn) -> None:
            conn.execute(SQL["heartbeat_among"], (now, list(worker_ids)))

        self._run(body, durable=False)
        # Pools beat every few seconds: the counters' deltas are folded as they go.
        self._fold()

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

        def body(conn: Conn) -> None:
            conn.execute(
                SQL["set_worker_status"],
                (status.value, current_job, now, ended, now, done, failed, worker_id),
            )

        self._run(body)

    def list_workers(self, active_only: bool = False) -> list[Worker]:
        sql = SQL["list_active_workers" if active_only else "list_workers"]
        with self.db.for_one_statement(self._wait) as conn:
            return WORKERS.all(conn, sql)

    def prune_workers(self, stopped_before: int) -> int:
        def body(conn: Conn) -> int:
            return conn.execute(SQL["prune_workers"], (stopped_before,)).rowcount

        return self._run(body)  # type: ignore[no-any-return]

    def request_stop(self, now: int) -> list[Worker]:
        def body(conn: Conn) -> list[Worker]:
            conn.execute(SQL["stop_lock"])
            conn.execute(SQL["request_stop"], (now,))
            return WORKERS.all(conn, SQL["active_workers_by_id"])

        return self._run(body)  # type: ignore[no-any-return]

    def stop_requested_after(self, request_id: int) -> bool:
        return bool(self._read(SQL["stop_requested_after"], (request_id,)))

    def stop_requested_since(self, since: int) -> bool:
        return bool(self._read(SQL["stop_requested_since"], (since,)))


# -- helpers --------------------------------------------------------------------------------------
def _one(conn: Conn, sql: str, params: Any = None) -> int:
    row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row else 0


def _unique(ids: Sequence[str]) -> list[str]:
    """The ids once each, without those no job can have: PostgreSQL's text holds no NUL (a
    statement given one fails), and no job id has one, so such an id names no job."""
    return [job_id for job_id in dict.fromkeys(ids) if _nameable(job_id)]


def _nameable(job_id: str) -> bool:
    return "\x00" not in job_id


def _ids(conn: Conn, sql: str, params: Any) -> list[str]:
    return [row[0] for row in conn.execute(sql, params).fetchall()]


def _in_order(found: list[str], asked: list[str]) -> list[str]:
    """`found` in the order the ids were asked for."""
    present = set(found)
    return [job_id for job_id in asked if job_id in present]


def _record(conn: Conn, action: Action | None, touched: int, now: int) -> None:
    if action is None or not action.recorded_for(touched):
        return
    conn.execute(
        SQL["record_action"],
        (now, action.face, action.actor, action.host, action.action, action.subject, touched),
    )


def _oldest_due(conn: Conn, queue: str, now: int) -> int | None:
    row = conn.execute(SQL["oldest_due"], (queue, now)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _insert_one(conn: Conn, spec: JobSpec, default_max_retries: int, now: int) -> EnqueueResult:
    """Store one job, or return the one its idempotency key names. Raises DuplicateJobError,
    leaving the caller's transaction usable (the insert did nothing)."""
    job = JOBS.first(conn, SQL["insert_job"], insert_values(spec, default_max_retries, now))
    if job is not None:
        return EnqueueResult(job, created=True)
    if spec.idempotency_key is not None:  # the key is taken: that job
        known = JOBS.first(conn, SQL["job_by_idempotency_key"], (spec.idempotency_key,))
        if known is not None:
            return EnqueueResult(known, created=False)
    raise DuplicateJobError(spec.id)


def _submit(
    conn: Conn,
    specs: Sequence[JobSpec],
    default_max_retries: int,
    now: int,
    admission: Admission,
    submitters: Sequence[Operator] = (),
) -> list[SubmitResult]:
    room = Room(
        admission,
        waiting=lambda: _one(conn, SQL["waiting_depth"]),
        waiting_of_type=lambda kind: _one(conn, SQL["waiting_of_type"], (kind,)),
        queues=lambda: [name for (name,) in conn.execute(SQL["existing_queues"])],
    )
    results, rejected = submit_each(
        specs,
        room,
        known=lambda key: JOBS.first(conn, SQL["job_by_idempotency_key"], (key,)),
        insert=lambda spec: _insert_one(conn, spec, default_max_retries, now),
    )
    if rejected:
        conn.execute(SQL["add_to_counter"], ("admission_rejected", rejected))
    audit = audit_rows(results, submitters, now)
    if audit:
        with conn.cursor() as cursor:  # one round trip for them all
            cursor.executemany(SQL["record_action"], audit)
    return results
