"""PostgresStore: the Store interface on PostgreSQL, for pools on many hosts sharing one queue.

Each call is one transaction on a connection borrowed from the process's pool (database.py).
Times are the database's clock (`now()`), so hosts whose clocks disagree still agree on when
a job is due and when a worker was last heard from."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg import sql as pgsql

from ...lifecycle import RetryPolicy
from ...models import (
    STATES,
    WAITING_STATES,
    Action,
    Job,
    JobSpec,
    JobState,
    Outcome,
    QueueCounts,
)
from .. import dependencies
from ..base import (
    BulkEnqueueResult,
    CancelResult,
    ChangeFeed,
    ClaimRequest,
    EnqueueResult,
    Exchange,
    MetricsSnapshot,
    QueueStats,
    StoreError,
)
from ..figures import attempt_figures, snapshot
from ..rows import Params, RowMap
from ..sql_base import SqlStore, count_of, in_order
from ..sqlfiles import named_statements
from . import bulk, claims, submit
from .database import DEFAULT_WAIT, Database, borrow, give_back
from .feed import ListenFeed
from .links import PostgresLinks
from .statements import SQL
from .url import parse

Conn = psycopg.Connection[Any]
T = TypeVar("T")

# Delta rows a count may add up before it folds them into the totals (see migration 1).
FOLD_AFTER = 500
SCHEDULE_SQL = named_statements(Path(__file__).with_name("sql") / "schedules.sql")


class PostgresStore(SqlStore):
    SQL = SQL
    SCHEDULE_SQL = SCHEDULE_SQL
    DURABLE_WORKER_ROWS = True  # the server may crash alone, pools on other hosts live on

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

    def _run(self, body: Callable[[Conn], T], durable: bool = True) -> T:
        return self.db.run(body, durable=durable, wait=self._wait)

    # -- how SqlStore's bodies run here ------------------------------------------------------------
    def _write(self, body: Callable[[Conn], T], durable: bool, gives_work: bool = True) -> T:
        return self._run(body, durable)  # the triggers tell listeners what gives work

    def _read(self, sql: str, params: Params | None = None) -> list[Any]:
        return self.db.read(sql, params, wait=self._wait)

    def _read_as(self, rows: RowMap[Any], sql: str, params: Params | None = None) -> list[Any]:
        with self.db.for_one_statement(self._wait) as conn:
            return rows.all(conn, sql, () if params is None else params)

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[Conn]:
        with self.db.connection(self._wait) as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield conn

    def _one_read(self) -> contextlib.AbstractContextManager[Conn]:
        return self.db.for_one_statement(self._wait)  # no BEGIN, no COMMIT: one round trip

    def _rows_among(
        self, conn: Conn, name: str, ids: Sequence[str], *params: object
    ) -> list[tuple[Any, ...]]:
        return conn.execute(SQL[name], (*params, list(ids))).fetchall()

    def _links(self, conn: Conn) -> PostgresLinks:
        return PostgresLinks(conn)

    def _insert_one(
        self, conn: Conn, spec: JobSpec, default_max_retries: int, now: int
    ) -> EnqueueResult:
        return submit.insert_one(conn, spec, default_max_retries, now)

    def _matching(self, texts: list[str]) -> tuple[list[str], list[Any]]:
        """Texts found through the trigram index: a condition each (bitmaps ANDed)."""
        return [SQL["list_jobs_matching_indexed"]] * len(texts), list(texts)

    def _queue_depths(self, conn: Conn) -> list[tuple[str, str, int]]:
        rows = conn.execute(SQL["job_counts"], {"queue": None})
        return [(name, state, n) for name, state, n, _ in rows if n > 0]

    def _oldest_due(self, conn: Conn, queue: str, now: int) -> int | None:
        return _oldest_due(conn, queue, now)

    def _nameable(self, text: str) -> bool:
        # PostgreSQL's text holds no NUL (a statement given one fails), and no stored name
        # has one, so such a name names nothing.
        return "\x00" not in text

    def _serialize(self, conn: Conn, lock: str) -> None:
        conn.execute(SCHEDULE_SQL[lock] if lock in SCHEDULE_SQL else SQL[lock])

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

    def change_feed(self, mode: str = "auto", work_only: bool = False) -> ChangeFeed:
        conninfo, options = self.db.listen_conninfo()
        return ListenFeed(conninfo, options, self._target.schema, self._target.shown)

    def change_token(self) -> int:
        return int(self._read(SQL["change_token"])[0][0])

    # -- jobs --------------------------------------------------------------------------------
    def enqueue(self, spec: JobSpec, default_max_retries: int, now: int) -> EnqueueResult:
        # The insert is a statement on its own, its own transaction (one round trip, durable
        # when it returns); only when it inserted nothing is the reason looked up.
        if spec.after:  # linked to its parents in the same transaction
            return self._run(lambda conn: submit.insert_one(conn, spec, default_max_retries, now))
        with self.db.for_one_statement(self._wait) as conn:
            return submit.insert_one(conn, spec, default_max_retries, now)

    def enqueue_batches(
        self, batches: Iterable[Sequence[JobSpec]], default_max_retries: int, now: int
    ) -> BulkEnqueueResult:
        result: BulkEnqueueResult = self._run(
            lambda conn: bulk.insert_batches(conn, batches, default_max_retries, now)
        )
        self._fold()
        return result

    def set_text_index(self, on: bool) -> None:
        # CONCURRENTLY: writers go on while it is built (and a cut-short build, left
        # invalid, is dropped and made again).
        with self.db.errors(self._wait), self.db.for_one_statement(self._wait) as conn:
            if not on:
                conn.execute(SQL["text_index_drop"])
                return
            if count_of(conn, SQL["text_index_present"]):
                return
            conn.execute(SQL["text_index_drop"])
            if conn.execute(SQL["trgm_schema"]).fetchone() is None:
                conn.execute(SQL["trgm_extension"])
            [(schema,)] = conn.execute(SQL["trgm_schema"]).fetchall()
            conn.execute(SQL["text_index_wait_freely"])
            try:
                conn.execute(text_index_statement(schema))
            except BaseException:
                # A build cut short leaves an invalid index that writers would still keep.
                with contextlib.suppress(psycopg.Error):
                    conn.execute(SQL["text_index_drop"])
                raise
            finally:
                with contextlib.suppress(psycopg.Error):
                    conn.execute(SQL["text_index_wait_as_before"])

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

    def cancel(self, job_ids: Sequence[str], now: int, action: Action | None) -> CancelResult:
        def body(conn: Conn) -> CancelResult:
            ids = self._unique(job_ids)
            rows = conn.execute(SQL["cancel_among"], {"now": now, "ids": ids}).fetchall()
            cancelled = [job_id for job_id, state in rows if state == "cancelled"]
            requested = [job_id for job_id, state in rows if state == "processing"]
            ended = [(job_id, "cancelled") for job_id in cancelled]
            dependencies.jobs_ended(PostgresLinks(conn), ended, now)
            self._record(conn, action, len(cancelled) + len(requested), now)
            return CancelResult(in_order(cancelled, ids), in_order(requested, ids))

        return self._run(body)

    def prune(self, state: JobState, before: int, limit: int) -> int:
        def body(conn: Conn) -> int:
            params = {"state": state.value, "before": before, "limit": max(0, limit)}
            return conn.execute(SQL["prune_batch"], params).rowcount

        return self._run(body)

    # -- the engine's protocol ------------------------------------------------------------------
    def exchange(self, request: ClaimRequest) -> Exchange:
        self._policy = request.policy
        try:
            done = self._exchange(request)
        except BaseException:
            # The connection may have dropped after the server committed: what this exchange
            # claimed is then the store's, unknown to the pool. The next one hands it back
            # (nothing, if it never reached the server).
            self._unsure.update(request.claimants)
            raise
        self._unsure.clear()
        return done

    def _exchange(self, request: ClaimRequest) -> Exchange:
        unsure, now, claimants = sorted(self._unsure), request.now, request.claimants
        # Not durable, as the engine's bookkeeping is: the statement itself says so.
        if (
            unsure
            or self._limits_seen
            or any(s.outcome is not Outcome.COMPLETED for s in request.settlements)
        ):
            # Runs settled by the lifecycle's rules, claims under a queue's limit, or claims
            # that may have committed unseen to hand back first: several statements, in one
            # transaction.
            def body(conn: Conn) -> tuple[Exchange, bool]:
                if unsure:
                    settling = [s.job.seq for s in request.settlements]
                    claims.hand_back_unseen(conn, unsure, settling, now, request.policy)
                exchanged, limited, _ = claims.exchange(conn, request)
                return exchanged, limited

            done: Exchange
            done, self._limits_seen = self._run(body)
            return done
        # The hot path: one statement, a transaction of its own (one round trip).
        with self.db.for_one_statement(self._wait) as conn:
            done, limited, freeing = claims.exchange(conn, request, under_limits=False)
        self._limits_seen = limited
        if freeing:  # jobs run after these: a transaction more (a pool that dies first: sweep)
            self._run(lambda conn: claims.free_children(conn, freeing, now))
        if not (limited and claimants):
            return done

        def claim_limited(conn: Conn) -> dict[str, Job]:
            return claims.claim_under_limits(conn, claimants, request.pid, now, request.queues)

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

        return self._run(body)

    def heartbeat(self, worker_ids: Sequence[str], now: int) -> None:
        def body(conn: Conn) -> None:
            conn.execute(SQL["heartbeat_among"], (now, list(worker_ids)))

        self._run(body, durable=False)
        # Pools beat every few seconds: the counters' deltas are folded as they go.
        self._fold()


# -- helpers --------------------------------------------------------------------------------------
def text_index_statement(trgm_schema: str) -> pgsql.Composed:
    """The text index, over the expression list_jobs_matching_indexed searches, with the
    operator class of pg_trgm wherever that extension lives."""
    return pgsql.SQL(
        "CREATE INDEX CONCURRENTLY jobs_text ON jobs USING gin "
        "((id || chr(1) || command || chr(1) || coalesce(last_error, '')) {}.gin_trgm_ops)"
    ).format(pgsql.Identifier(trgm_schema))


def _oldest_due(conn: Conn, queue: str, now: int) -> int | None:
    row = conn.execute(SQL["oldest_due"], {"queue": queue, "now": now}).fetchone()
    return None if row is None or row[0] is None else int(row[0])
