"""What only the PostgreSQL store does: its schema, its clock, LISTEN/NOTIFY, SKIP LOCKED
claims beside a transaction that holds a job, and counters folded from their deltas."""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import NOW, POLICY, claim, register

from queuectl_tui.models import Action, Job, JobState, Outcome, WorkerStatus
from queuectl_tui.store import (
    ClaimRequest,
    Exchange,
    ForeignDatabaseError,
    Settlement,
    Store,
    StoreError,
    StoreOptions,
    open_store,
)
from queuectl_tui.store.postgres.statements import SQL as PG_SQL
from queuectl_tui.store.postgres.url import parse

from helpers import (
    POSTGRES_URL,
    REQUIRE_POSTGRES,
    drop_test_schemas,
    postgres_available,
    postgres_location,
    spec,
)

_missing = postgres_available()
pytestmark = pytest.mark.skipif(
    _missing is not None and not REQUIRE_POSTGRES, reason=_missing or ""
)

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def location(tmp_path: Path) -> Iterator[str]:
    yield postgres_location(tmp_path)
    drop_test_schemas()


@pytest.fixture
def pg(location: str) -> Iterator[Store]:
    with open_store(location) as store:
        yield store


def _raw(location: str):  # a connection of the test's own, in the queue's schema
    target = parse(location)
    return psycopg.connect(target.conninfo, options=f"-c search_path={target.schema}")


def test_a_schema_holding_other_tables_is_refused_untouched(tmp_path: Path) -> None:
    location = postgres_location(tmp_path, "foreign")
    schema = parse(location).schema
    try:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
            conn.execute(f"CREATE TABLE {schema}.customers (id int)")
        with pytest.raises(ForeignDatabaseError, match="tables of another application"):
            open_store(location)
        with psycopg.connect(POSTGRES_URL) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            ).fetchall()
        assert tables == [("customers",)]
    finally:
        drop_test_schemas()


def test_a_queue_of_a_newer_schema_is_refused(location: str, pg: Store) -> None:
    with _raw(location) as conn:
        conn.execute("INSERT INTO queuectl_migrations (version, name) VALUES (99, 'future')")
    pg.close()
    from queuectl_tui.store.postgres import database

    database._shared.clear()  # a new process would read the version afresh
    with pytest.raises(StoreError, match="made by a newer queuectl"):
        open_store(location)


def test_the_clock_is_the_database_s(pg: Store) -> None:
    with _raw(pg.location) as conn:
        before = conn.execute(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"
        ).fetchone()[0]
        ours = pg.now()
        after = conn.execute(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"
        ).fetchone()[0]
    assert before - 50 <= ours <= after + 50


def test_every_store_of_a_process_tells_the_same_time(
    location: str, pg: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pool's dispatcher plans its statements once, its main thread does not: two stores.
    # Had the dispatcher's store read the clock on its own, through an answer slow to come
    # back, its clock would run behind the main thread's, and a job the main thread recovered
    # as due would not yet be due for the claim.
    from queuectl_tui.store.postgres import statements

    pg.now()  # the main thread's store has read the clock
    slow_answer = (
        "WITH read AS MATERIALIZED (SELECT clock_timestamp() AS at) "
        "SELECT (extract(epoch FROM at) * 1000)::bigint FROM read, pg_sleep(0.3)"
    )
    monkeypatch.setitem(statements.SQL, "now_ms", slow_answer)
    with open_store(location, StoreOptions(planned_once=True)) as dispatcher:
        for _ in range(50):
            seen = pg.now()
            assert dispatcher.now() >= seen
            assert pg.now() >= dispatcher.now() - 5


def test_the_clock_never_goes_back_when_it_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from queuectl_tui.store.postgres import clock

    server = clock.ServerClock()
    moments = iter([0.0, 10.0, 10.0, 10.05, 10.05, 10.2, 10.2])  # each call: check, tell
    monkeypatch.setattr(clock.time, "monotonic", lambda: next(moments))
    # A second reading, 10.05 s later, that comes out 100 ms behind the first one.
    readings = iter([(1_000_000, 0.0), (1_009_950, 10.05)])
    told = [server.now(lambda wait: next(readings), 1.0, 1.0) for _ in range(4)]
    assert told == [1_000_000, 1_010_000, 1_010_000, 1_010_100]


def test_an_enqueue_by_another_store_wakes_the_feed(location: str, pg: Store) -> None:
    feed = pg.change_feed()
    try:
        assert feed.mode == "listen"
        feed.drain()  # the first drain looks anyway
        with open_store(location) as other:
            other.enqueue(spec(id="wake"), 3, NOW)
        fd = feed.fileno()
        assert fd is not None
        ready, _, _ = select.select([fd], [], [], 10)
        assert ready
        assert feed.drain()
        assert not feed.drain()  # heard once; the backstop is a second away
        assert feed.wait_at_most() <= 1.0
    finally:
        feed.close()


def test_a_run_that_ends_in_a_limited_queue_wakes_the_feed(location: str, pg: Store) -> None:
    """Room in a queue with a limit is work for a pool that serves it: it is told at once,
    not at the feed's backstop."""
    pg.set_queue_limit("reports", 1, NOW, Action("cli", "t", "h", "limit", "reports"))
    for name in ("r1", "r2"):
        pg.enqueue(spec(id=name, queue="reports"), 3, NOW)
    job = claim(pg, "w1", NOW + 1)
    assert job is not None and job.queue == "reports"
    feed = pg.change_feed()
    try:
        fd = feed.fileno()
        assert fd is not None
        feed.drain()  # the first drain looks anyway
        with open_store(location) as other:
            settlement = Settlement(job, Outcome.COMPLETED, 0, "", None, NOW + 2)
            other.exchange(ClaimRequest([settlement], [], 1, NOW + 2, POLICY))
        ready, _, _ = select.select([fd], [], [], 10)  # a notification, or none at all
        assert ready, "the room was not told"
        assert feed.drain()
    finally:
        feed.close()


def test_a_claim_skips_a_job_another_transaction_holds(location: str, pg: Store) -> None:
    pg.enqueue(spec(id="held", priority=9), 3, NOW)
    pg.enqueue(spec(id="free"), 3, NOW)
    register(pg, "w1")
    taken: list[object] = []
    with _raw(location) as conn:
        conn.execute("SELECT 1 FROM jobs WHERE id = 'held' FOR UPDATE")
        # Without SKIP LOCKED the claim would wait for this transaction, which ends only
        # after it: a thread, so that such a wait fails the test instead of hanging it.
        claimer = threading.Thread(target=lambda: taken.append(claim(pg, "w1")), daemon=True)
        claimer.start()
        claimer.join(timeout=60)
        conn.rollback()
    claimer.join(timeout=60)
    assert len(taken) == 1, "the claim waited for the job another transaction holds"
    job = taken[0]
    assert isinstance(job, Job) and job.id == "free"
    assert pg.get("held").state is JobState.PENDING


def test_counts_fold_their_deltas_and_stay_right(location: str, pg: Store) -> None:
    for n in range(600):  # one delta row per enqueue, beyond what a count folds at
        pg.enqueue(spec(id=f"j{n}"), 3, NOW)
    assert pg.counts()[JobState.PENDING] == 600
    with _raw(location) as conn:
        deltas = conn.execute("SELECT count(*) FROM job_count_deltas").fetchone()[0]
        folded = conn.execute(
            "SELECT n FROM job_counts WHERE queue = 'default' AND state = 'pending'"
        ).fetchone()
    assert deltas == 0 and folded == (600,)
    assert pg.counts()[JobState.PENDING] == 600
    assert pg.queue_counts().by_state[JobState.PENDING] == 600


def test_a_worker_declared_lost_meanwhile_gets_nothing(location: str, pg: Store) -> None:
    """A recovery marks the worker lost and has not committed yet when the worker's pool
    claims: the claim waits for it, reads the worker again, and takes nothing (a job given
    to a lost worker would be an orphan at once, and run twice)."""
    pg.enqueue(spec(id="next"), 3, NOW)
    register(pg, "w0")
    outcome: list[object] = []
    with _raw(location) as recovery:
        recovery.execute("UPDATE workers SET status = 'lost' WHERE id = 'w0'")
        claimer = threading.Thread(
            target=lambda: outcome.append(pg.exchange(ClaimRequest([], ["w0"], 1, NOW, POLICY))),
            daemon=True,
        )
        claimer.start()
        claimer.join(timeout=1.0)  # it waits for the recovery's lock (or, before, claimed)
        recovery.commit()
    claimer.join(timeout=60)
    assert len(outcome) == 1
    exchange = outcome[0]
    assert isinstance(exchange, Exchange) and exchange.claimed == {}
    assert pg.get("next").state is JobState.PENDING


def test_a_heartbeat_takes_worker_rows_in_the_exchanges_order(location: str, pg: Store) -> None:
    """An exchange locks its workers' rows in id order. A heartbeat must take them in the same
    order: one that took "w2" and then waited for "w1", which an exchange holds while it waits
    for "w2", deadlocked (the server aborted the exchange)."""
    register(pg, "w2")  # first in the table, so a plain scan of it meets w2 first
    register(pg, "w1")

    def heartbeat() -> None:  # the store's statement, under the plan a big table may get
        with _raw(location) as conn:
            conn.execute("SET enable_indexscan = off")
            conn.execute("SET enable_bitmapscan = off")
            conn.execute(PG_SQL["heartbeat_among"], (NOW, ["w1", "w2"]))
            conn.commit()

    with _raw(location) as exchange:
        exchange.execute("SELECT id FROM workers WHERE id = 'w1' FOR SHARE")
        beat = threading.Thread(target=heartbeat, daemon=True)
        beat.start()
        beat.join(timeout=1.0)  # it waits for w1 (or, before, held w2 already)
        assert beat.is_alive()
        # The exchange goes on to its next row: free, as the heartbeat has not reached it.
        exchange.execute("SET lock_timeout = '5s'")
        exchange.execute("SELECT id FROM workers WHERE id = 'w2' FOR SHARE")
        exchange.commit()
    beat.join(timeout=60)
    assert not beat.is_alive()
    assert {w.id: w.last_heartbeat for w in pg.list_workers()} == {"w1": NOW, "w2": NOW}


def test_a_job_ended_by_hand_gets_an_end_time_and_is_a_dead_letter(
    location: str, pg: Store
) -> None:
    pg.enqueue(spec(id="by-hand"), 3, NOW)
    with _raw(location) as conn:
        conn.execute("UPDATE jobs SET state = 'dead' WHERE id = 'by-hand'")
    job = pg.get("by-hand")
    assert job is not None and job.finished_at == job.updated_at == NOW
    listed = pg.list_jobs(JobState.DEAD, newest_first=True, by_end=True)
    assert [j.id for j in listed] == ["by-hand"]


def test_workers_rows_are_committed_durably(pg: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # The server can crash on its own while pools on other hosts live on: a pool whose
    # workers' rows it lost would claim nothing more.
    database = pg.db  # type: ignore[attr-defined]
    asked: list[bool] = []
    run = type(database).run

    def recording(self: object, body: object, durable: bool = True, **kw: object) -> object:
        asked.append(durable)
        return run(self, body, durable=durable, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(type(database), "run", recording)
    register(pg, "w1")
    pg.set_worker_status("w1", WorkerStatus.STOPPED, None, NOW + 1)
    pg.prune_workers(NOW + 2)
    assert asked == [True, True, True]
