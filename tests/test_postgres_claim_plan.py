"""The PostgreSQL claim at scale: with the jobs table's statistics gathered (as autovacuum
does on any server) and a large backlog, the exchange's pick is a range scan of jobs_ready
that stops at the jobs it takes, under the plan made for the call's parameters and under the
plan made once for any (a generic plan, which PostgreSQL may choose after a few calls), and
jobs of a higher priority scheduled for later are neither walked past nor claimed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_helpers import register

from queuectl_tui.bench.backlog import Backlog, analyze, load
from queuectl_tui.lifecycle import RetryPolicy
from queuectl_tui.models import Action, JobSpec
from queuectl_tui.store import ClaimRequest, Store, open_store
from queuectl_tui.store.postgres import claims
from queuectl_tui.store.postgres.statements import SQL
from queuectl_tui.store.postgres.url import parse

from helpers import REQUIRE_POSTGRES, drop_test_schemas, postgres_available, postgres_location

_missing = postgres_available()
pytestmark = pytest.mark.skipif(
    _missing is not None and not REQUIRE_POSTGRES, reason=_missing or ""
)

psycopg = pytest.importorskip("psycopg")

WORKERS = [f"plan-worker:{n}" for n in range(10)]
# Big enough that, with statistics, a pick that filters on run_at or on a list the planner
# cannot see sorts every due job instead (the plan this checks against).
BACKLOG = Backlog(due=40_000, later=40_000)


@pytest.fixture(scope="module")
def backlog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    location = postgres_location(tmp_path_factory.mktemp("claim-plan"))
    load(location, BACKLOG)  # ANALYZEs the jobs table once loaded
    with open_store(location) as store:
        now = store.now()
        # A small queue a pool may serve alone, behind the big one in claim order.
        small = [JobSpec(f"small-{n}", "true", 0, now - 1, 0, queue="small") for n in range(20)]
        store.enqueue_many(small, 0, now)
        register(store, *WORKERS, now=now)
    analyze(location)  # the statistics see both queues, as autovacuum's would
    yield location
    drop_test_schemas()


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Store]:
    """A new queue of its own, its workers registered; dropped afterwards."""
    try:
        with open_store(postgres_location(tmp_path)) as store:
            register(store, *WORKERS, now=store.now())
            yield store
    finally:
        drop_test_schemas()


def _taken(
    store: Store, queues: list[str] | None = None, claimants: list[str] = WORKERS
) -> list[str]:
    """The ids one exchange claims for `claimants`, in their order."""
    done = store.exchange(ClaimRequest([], claimants, 1, store.now(), RetryPolicy(), queues))
    return [done.claimed[worker].id for worker in claimants if worker in done.claimed]


def _connect(location: str) -> Any:
    target = parse(location)
    return psycopg.connect(target.conninfo, options=f"-c search_path={target.schema}")


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _explain(location: str, sql: str, params: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    """The plan's nodes as the statement ran (rolled back) under plan_cache_mode `mode`,
    from auto_explain: an EXPLAIN would plan the parameters in as constants, so a generic
    plan is only seen as the statement runs."""
    notices: list[str] = []
    with _connect(location) as conn:
        conn.add_notice_handler(lambda notice: notices.append(notice.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for setting, value in (
            ("auto_explain.log_level", "notice"),
            ("auto_explain.log_min_duration", "0"),
            ("auto_explain.log_analyze", "on"),
            ("auto_explain.log_buffers", "on"),
            ("auto_explain.log_format", "json"),
            ("plan_cache_mode", mode),
        ):
            conn.execute(f"SET {setting} = {value}")
        conn.execute(sql, params, prepare=True).fetchall()
        conn.rollback()
    plans = [json.loads(text.split("plan:", 1)[1]) for text in notices if "plan:" in text]
    assert len(plans) == 1, notices
    nodes = list(_nodes(plans[0]["Plan"]))
    if mode == "force_generic_plan":  # parameters seen as such, not planned in as values
        assert any("$" in str(node.get("Index Cond", "")) for node in nodes), nodes
    return nodes


def _scans_of_jobs(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes that read jobs and ran (a branch for other parameters never does)."""
    return [
        node
        for node in nodes
        if node.get("Relation Name") == "jobs" and node.get("Actual Loops", 0) > 0
    ]


def _assert_picks_by_index(nodes: list[dict[str, Any]], claimed: int) -> None:
    scans = _scans_of_jobs(nodes)
    kinds = {node["Node Type"] for node in scans}
    assert "Seq Scan" not in kinds, kinds
    assert "Bitmap Heap Scan" not in kinds, kinds
    sorts = [node for node in nodes if node["Node Type"] == "Sort"]
    # Only the claimed rows are ever sorted (to number them): never the backlog.
    assert all(node["Actual Rows"] <= claimed for node in sorts), sorts
    ready = [node for node in scans if node.get("Index Name") == "jobs_ready"]
    assert ready, scans
    # The range scan stops at the jobs taken (none walked past, a job scheduled later, say),
    # and the levels' seeks read one row each.
    read = sum(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in ready
    )
    assert read <= claimed + 10, ready
    # Nor walked past inside the index (a condition on run_at checked entry by entry reads
    # every page of jobs scheduled later): a few pages per level, whatever the backlog.
    pages = sum(node["Shared Hit Blocks"] + node["Shared Read Blocks"] for node in ready)
    assert pages <= 60, ready


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
def test_the_exchange_claims_by_an_index_scan_that_stops_at_the_jobs_it_takes(
    backlog: str, mode: str
) -> None:
    with open_store(backlog) as store:
        now = store.now()
    params = claims.exchange_parameters([], WORKERS, 1, now, None, {})
    nodes = _explain(backlog, SQL["exchange"], params, mode)
    claimed = [node for node in nodes if node["Node Type"] == "ModifyTable"]
    assert any(node["Actual Rows"] == len(WORKERS) for node in claimed)
    _assert_picks_by_index(nodes, len(WORKERS))


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
def test_the_claim_under_a_queue_limit_keeps_the_same_shape(backlog: str, mode: str) -> None:
    with open_store(backlog) as store:
        now = store.now()
    params = {
        "now": now,
        "pid": 1,
        "served": None,
        "closed": [],
        "n": len(WORKERS),
        "workers": WORKERS,
    }
    nodes = _explain(backlog, SQL["claim"], params, mode)
    _assert_picks_by_index(nodes, len(WORKERS))


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("served", [["small"], ["small", "other"]])
def test_a_pool_serving_a_small_queue_walks_past_no_other_queue(
    backlog: str, mode: str, served: list[str]
) -> None:
    with open_store(backlog) as store:
        now = store.now()
    params = claims.exchange_parameters([], WORKERS, 1, now, served, {})
    nodes = _explain(backlog, SQL["exchange"], params, mode)
    _assert_walks_past_nothing(nodes, len(WORKERS) * len(served))
    nodes = _explain(backlog, SQL["has_due_work"], {"now": now, "served": served}, mode)
    _assert_walks_past_nothing(nodes, len(served))


def _assert_walks_past_nothing(nodes: list[dict[str, Any]], read_at_most: int) -> None:
    scans = _scans_of_jobs(nodes)
    assert {node["Node Type"] for node in scans} <= {"Index Scan", "Index Only Scan", "ModifyTable"}
    ready = [n for n in scans if n.get("Index Name") in ("jobs_ready", "jobs_queue_ready")]
    read = sum(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in ready
    )
    assert read <= read_at_most + 10, ready
    pages = sum(node["Shared Hit Blocks"] + node["Shared Read Blocks"] for node in ready)
    assert pages <= 60, ready


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
def test_a_paused_queue_among_the_served_ones_is_not_looked_into(backlog: str, mode: str) -> None:
    """The big queue paused: a pool serving it and the small one reads the small one's jobs
    alone."""
    with open_store(backlog) as store:
        now = store.now()
    params = claims.exchange_parameters([], WORKERS, 1, now, ["default", "small"], {})
    with _connect(backlog) as conn:
        conn.execute("INSERT INTO queues (name, paused, updated_at) VALUES ('default', true, 0)")
        conn.commit()
    try:
        nodes = _explain(backlog, SQL["exchange"], params, mode)
    finally:
        with _connect(backlog) as conn:
            conn.execute("DELETE FROM queues WHERE name = 'default'")
    _assert_walks_past_nothing(nodes, 20)  # the small queue's twenty jobs, no more
    claimed = [node for node in nodes if node["Node Type"] == "ModifyTable"]
    assert any(node["Actual Rows"] == len(WORKERS) for node in claimed)


def test_claims_go_down_the_priorities_past_jobs_scheduled_later(fresh: Store) -> None:
    now, hour = fresh.now(), 3_600_000
    fresh.enqueue_many(
        [JobSpec(f"later-{n}", "true", 9, now + hour, 0) for n in range(5)]
        + [JobSpec(f"high-{n}", "true", 5, now - 2, 0) for n in range(3)]
        + [JobSpec(f"mid-{n}", "true", 1, now - 1 - n, 0) for n in range(3)]
        + [JobSpec(f"low-{n}", "true", -4, now - 5, 0) for n in range(6)],
        0,
        now,
    )
    # Best first: priority, then run_at, then creation; nothing not yet due.
    assert _taken(fresh) == [
        *(f"high-{n}" for n in range(3)),
        "mid-2",
        "mid-1",
        "mid-0",
        *(f"low-{n}" for n in range(4)),
    ]


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
def test_looking_for_due_work_walks_past_nothing(backlog: str, mode: str) -> None:
    with open_store(backlog) as store:
        now = store.now()
    nodes = _explain(backlog, SQL["has_due_work"], {"now": now, "served": None}, mode)
    _assert_picks_by_index(nodes, 1)


def test_a_store_that_plans_once_keeps_its_plans_on_connections_of_its_own(
    backlog: str,
) -> None:
    from queuectl_tui.store import StoreOptions

    with (
        open_store(backlog, StoreOptions(planned_once=True)) as dispatching,
        open_store(backlog) as reading,
    ):
        assert dispatching.db is not reading.db  # type: ignore[attr-defined]
        modes = [
            store.db.read("SHOW plan_cache_mode")[0][0]  # type: ignore[attr-defined]
            for store in (dispatching, reading)
        ]
    assert modes == ["force_generic_plan", "auto"]


def test_a_pool_serving_several_queues_takes_their_jobs_in_one_order(fresh: Store) -> None:
    now = fresh.now()
    fresh.enqueue_many(
        [
            JobSpec("a-early", "true", 0, now - 30, 0, queue="a"),
            JobSpec("b-middle", "true", 0, now - 20, 0, queue="b"),
            JobSpec("a-late", "true", 0, now - 10, 0, queue="a"),
            JobSpec("c-oldest", "true", 0, now - 90, 0, queue="c"),
            JobSpec("b-urgent", "true", 3, now - 5, 0, queue="b"),
            JobSpec("paused-d", "true", 9, now - 5, 0, queue="d"),
        ],
        0,
        now,
    )
    fresh.set_queue_paused("d", True, now, Action("cli", "t", "h", "pause", "d"))
    assert _taken(fresh, ["a", "b", "d"]) == ["b-urgent", "a-early", "b-middle", "a-late"]


def test_a_claim_from_several_queues_locks_only_what_it_takes(fresh: Store) -> None:
    """While one pool's claim from queues a and b is open, another pool finds every job it
    did not take: none is held back unclaimed (the other would sleep beside due work)."""
    now = fresh.now()
    fresh.enqueue_many(
        [
            JobSpec(f"{queue}-{n}", "true", 0, now - 10 + n, 0, queue=queue)
            for queue in ("a", "b")
            for n in range(3)
        ],
        0,
        now,
    )
    with _connect(fresh.location) as holding:  # type: ignore[attr-defined]
        first = claims.claim(holding, WORKERS[:2], 1, now, ["a", "b"])
        # Still open: its locks are held while the other pool claims.
        others = _taken(fresh, claimants=WORKERS[2:6])
        holding.rollback()
    assert [job.id for job in first] == ["a-0", "b-0"]
    assert sorted(others) == ["a-1", "a-2", "b-1", "b-2"]


def test_a_queue_named_twice_is_served_once(fresh: Store) -> None:
    now = fresh.now()
    fresh.enqueue_many(
        [JobSpec(f"a-{n}", "true", 0, now - 10 + n, 0, queue="a") for n in range(4)], 0, now
    )
    assert sorted(_taken(fresh, ["a", "a"], WORKERS[:4])) == ["a-0", "a-1", "a-2", "a-3"]


def test_the_exchange_commits_without_waiting_for_the_wal_flush(backlog: str) -> None:
    """The engine's bookkeeping, whose loss at most runs a job again (see `exchange`)."""
    with open_store(backlog) as store:
        now = store.now()
    with _connect(backlog) as conn:
        params = claims.exchange_parameters([], [], 1, now, None, {})
        conn.execute(SQL["exchange"], params).fetchall()
        setting = conn.execute("SHOW synchronous_commit").fetchone()[0]
        conn.rollback()
    assert setting == "off"


@pytest.mark.parametrize("served", [None, ["a"], ["a", "b"]])
def test_below_thirty_two_levels_the_claim_walks_the_index_and_finds_every_job(
    fresh: Store, served: list[str] | None
) -> None:
    """Forty priorities with a job scheduled later each, above the due ones: the levels are
    looked at 32 at a time and the rest walked, and no due job is missed."""
    now, hour = fresh.now(), 3_600_000
    later = [JobSpec(f"later-{p}", "true", 100 + p, now + hour, 0) for p in range(40)]
    due = [
        JobSpec("a-high", "true", -1, now - 5, 0, queue="a"),
        JobSpec("b-high", "true", -1, now - 4, 0, queue="b"),
        JobSpec("a-low", "true", -2, now - 9, 0, queue="a"),
        JobSpec("c-other", "true", -1, now - 9, 0, queue="c"),
    ]
    fresh.enqueue_many(later + due, 0, now)
    assert fresh.has_due_work(now, served)
    taken = _taken(fresh, served)
    assert not fresh.has_due_work(now, served)
    expected = {
        None: ["c-other", "a-high", "b-high", "a-low"],
        ("a",): ["a-high", "a-low"],
        ("a", "b"): ["a-high", "b-high", "a-low"],
    }
    assert taken == expected[None if served is None else tuple(served)]


@pytest.mark.parametrize("served", [None, ["default"], ["default", "other"]])
def test_thousands_of_priorities_scheduled_later_cost_a_claim_a_few_pages(
    fresh: Store, served: list[str] | None
) -> None:
    now, location = fresh.now(), fresh.location  # type: ignore[attr-defined]
    later = [JobSpec(f"l-{p}", "true", 10 + p, now + 3_600_000, 0) for p in range(2_000)]
    due = [JobSpec(f"d-{n}", "true", 0, now - 100, 0) for n in range(50)]
    fresh.enqueue_many(later + due, 0, now)
    analyze(location)
    params = claims.exchange_parameters([], WORKERS, 1, now, served, {})
    nodes = _explain(location, SQL["exchange"], params, "force_generic_plan")
    claimed = [node for node in nodes if node["Node Type"] == "ModifyTable"]
    assert any(node["Actual Rows"] == len(WORKERS) for node in claimed)
    ready = [
        node
        for node in _scans_of_jobs(nodes)
        if node.get("Index Name") in ("jobs_ready", "jobs_queue_ready")
    ]
    # 32 levels' seeks and scans, then one walk of the index past the rest: a level per seek
    # all the way down read a few pages for each of the 2,000.
    pages = sum(node["Shared Hit Blocks"] + node["Shared Read Blocks"] for node in ready)
    assert pages <= 400, pages
