"""`queuectl bench --quick` runs end to end and prints well-formed results (never judged on
its numbers: performance is reported, not asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import POSTGRES_URL, REQUIRE_POSTGRES, RunCli


@pytest.mark.slow
def test_quick_bench_prints_every_measure_as_json(run_cli: RunCli) -> None:
    result = run_cli("bench", "--quick", "--json", "--workers", "4", db=False)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "cores" in report["machine"]
    names = [measure["name"] for measure in report["results"]]
    for expected in (
        "bulk enqueue",
        "throughput, 'sleep 0.05'",
        "throughput, 'true'",
        "mixed, flat out: enqueue rate",
        "pickup latency p50",
        "pickup latency p95",
        "pool CPU per trickled job",
        "idle pool CPU",
        "claim cost (one exchange, 4 settled + 4 claimed), 2,000 due",
        "drain rate, 4 workers, 20,000 due + 10,000 higher-priority later",
        "1 pool of 4 workers on one queue",
        "4 pools of 4 workers on one queue",
        "status counts",
        "one page of 50 jobs",
        "stats, ",
        "queuectl status, cold process",
        "HTTP submissions, 1 client",
        "HTTP submissions, 8 clients",
        "store's durable insert",
        "queuectl enqueue, a process per job",
    ):
        assert any(name.startswith(expected) for name in names), expected
    for measure in report["results"]:
        assert measure["value"] >= 0 and measure["unit"]
        assert measure["target"] == ""  # quick sizes are judged against nothing
        if measure["baseline"] is not None:
            assert measure["ratio"] == pytest.approx(measure["value"] / measure["baseline"])


def test_the_quick_report_names_its_database_once_and_judges_nothing(run_cli: RunCli) -> None:
    result = run_cli("bench", "--quick", "--only", "bulk", db=False)
    assert result.returncode == 0, result.stderr
    words = " ".join(result.stdout.split())  # the caption wraps to the table's width
    assert words.count("database: SQLite") == 1
    assert "TARGET" not in words and "100,000 jobs/s" not in words
    assert "targets are judged on full runs" in words


def test_bench_refuses_unknown_scenarios(run_cli: RunCli) -> None:
    result = run_cli("bench", "--only", "warp", db=False)
    assert result.returncode == 2 and "warp" in result.stderr


@pytest.mark.slow
def test_quick_mixed_bench_reports_the_producer_and_the_pool(run_cli: RunCli) -> None:
    result = run_cli(
        "bench",
        "--quick",
        "--json",
        "--only",
        "mixed",
        "--workers",
        "4",
        "--mixed-jobs",
        "50",
        db=False,
    )
    assert result.returncode == 0, result.stderr
    measures = {measure["name"]: measure for measure in json.loads(result.stdout)["results"]}
    for phase in ("paced at half capacity", "flat out"):
        for figure in ("enqueue rate", "give-ups", "end-to-end p50", "end-to-end p95"):
            measure = measures[f"mixed, {phase}: {figure}"]
            assert measure["value"] >= 0 and measure["unit"]
    capacity = measures["mixed, bulk-loaded capacity"]["value"]
    # Paced at half the pool's own rate, on a fixed schedule: never faster.
    paced = measures["mixed, paced at half capacity: enqueue rate"]["value"]
    assert 0 < paced <= 0.5 * capacity * 1.05
    during = next(m for name, m in measures.items() if name.startswith("mixed, flat out: pool"))
    assert during["baseline"] == pytest.approx(capacity) and capacity > 0
    assert during["ratio"] == pytest.approx(during["value"] / capacity)
    assert measures["mixed, flat out: give-ups"]["unit"] == "count"


@pytest.mark.slow
def test_quick_bench_on_postgres_reports_figures_and_drops_its_schemas(
    run_cli: RunCli, postgres_missing: str | None
) -> None:
    _need_postgres(postgres_missing)
    before = _bench_schemas()
    result = run_cli(
        *("bench", "--quick", "--json", "--only", "bulk", "--only", "cli"),
        *("--db", POSTGRES_URL),
        db=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["backend"] == "postgresql" and "PostgreSQL" in report["database"]
    names = [measure["name"] for measure in report["results"]]
    assert names == ["bulk enqueue", "queuectl status, cold process"]
    assert all(measure["value"] > 0 for measure in report["results"])
    # Only those of a bench run by someone else at the same time may be there.
    assert _bench_schemas() <= before


@pytest.mark.slow
def test_backlog_and_pools_bench_on_postgres_compare_with_their_smallest_case(
    run_cli: RunCli, postgres_missing: str | None
) -> None:
    _need_postgres(postgres_missing)
    before = _bench_schemas()
    result = run_cli(
        *("bench", "--quick", "--json", "--only", "backlog", "--only", "pools"),
        *("--workers", "4", "--trivial-jobs", "100", "--db", POSTGRES_URL),
        db=False,
    )
    assert result.returncode == 0, result.stderr
    measures = json.loads(result.stdout)["results"]
    costs = [m for m in measures if m["name"].startswith("claim cost")]
    drains = [m for m in measures if m["name"].startswith("drain rate")]
    pools = [m for m in measures if " on one queue" in m["name"]]
    assert [m["details"]["due"] for m in costs] == [2_000, 20_000, 20_000]
    assert [m["details"]["later"] for m in drains] == [0, 0, 10_000]
    for group in (costs, drains, pools):
        assert all(m["value"] > 0 for m in group)
        assert all(m["baseline"] == pytest.approx(group[0]["value"]) for m in group)
    assert [m["name"].split(" pool")[0] for m in pools] == ["1", "2", "4"]
    assert _bench_schemas() <= before


def _need_postgres(missing: str | None) -> None:
    if missing is not None:
        if REQUIRE_POSTGRES:
            pytest.fail(f"{missing} (QUEUECTL_REQUIRE_POSTGRES is set)")
        pytest.skip(missing)


def test_bench_without_db_measures_sqlite(tmp_path: Path) -> None:
    from queuectl_tui.bench.places import Places
    from queuectl_tui.store import open_store

    places = Places(tmp_path)
    location = places.location("cli")
    open_store(location).close()
    assert places.backend == "sqlite" and location == str(tmp_path / "cli.db")
    assert "SQLite" in places.describe()
    places.close()
    assert list(tmp_path.iterdir()) == []  # the file and the ones beside it


def _bench_schemas() -> set[str]:
    import psycopg

    sql = "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE %s"
    with psycopg.connect(POSTGRES_URL) as conn:
        rows = conn.execute(sql, ("bench\\_%",)).fetchall()
    return {row[0] for row in rows}
