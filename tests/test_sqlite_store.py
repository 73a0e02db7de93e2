"""SQLite's own checks, apart from the store contract: its files, its schema versions, its
query plans, and what SQL written by hand around the store leaves intact."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import NOW, POLICY, claim, settle, sqlite_file

from queuectl_tui.models import ACTIVE_WORKER_STATUSES, Job, JobState, Outcome
from queuectl_tui.store import SQLiteStore, StoreError
from queuectl_tui.store.sqlite.rows import JOBS
from queuectl_tui.store.sqlite.statements import SQL

from helpers import spec


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteStore]:
    """SQLite whatever backends the contract suite runs against."""
    opened = SQLiteStore(db_path)
    yield opened
    opened.close()


def test_a_job_deleted_by_hand_leaves_the_all_time_totals_as_they_were(
    store: SQLiteStore,
) -> None:
    store.enqueue_many([spec(id=f"j{i}") for i in range(2)], 3, NOW)
    for number in range(2):
        settle(store, claim(store, now=NOW + number), now=NOW + 10 + number)
    assert store.stats(NOW + 100).attempts_total == 2
    with sqlite_file(store.location, writable=True) as conn:
        conn.execute("DELETE FROM jobs WHERE id = 'j0'")
        assert conn.execute("SELECT count(*) FROM attempts").fetchone()[0] == 1  # j0's went with it
    assert store.stats(NOW + 100).attempts_total == 2


def test_orphans_of_unknown_workers_are_recovered(store: SQLiteStore) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    claim(store, "vanished")
    with sqlite_file(store.location, writable=True) as conn:
        conn.execute("DELETE FROM workers WHERE id = 'vanished'")
    assert [j.id for j in store.recover_orphans([], POLICY, NOW + 1)] == ["a"]


def test_an_earlier_database_gets_its_attempt_totals_when_it_is_opened(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    with SQLiteStore(path) as store:
        store.enqueue_many([spec(id=f"j{i}") for i in range(3)], 3, NOW)
        for i, outcome in enumerate((Outcome.COMPLETED, Outcome.FAILED, Outcome.LOST)):
            job = claim(store, now=NOW + i)
            settle(store, job, outcome, now=NOW + 100 + i, exit_code=0 if i == 0 else 1)
    with sqlite3.connect(path) as conn:  # as version 1 left it: no totals, no triggers
        conn.executescript(
            "DROP TRIGGER attempts_count_insert; DROP TABLE attempt_totals;"
            "DROP TABLE attempt_rates; PRAGMA user_version = 1;"
        )
    with SQLiteStore(path) as store:
        stats = store.stats(NOW + 1000)
        assert (stats.attempts_total, stats.attempts_failed) == (3, 2)
        assert stats.completed_per_minute[-1] == 1 and stats.failed_per_minute[-1] == 2


def test_jobs_survive_reopening(db_path: Path) -> None:
    first = SQLiteStore(db_path)
    first.enqueue(spec(id="a"), 3, NOW)
    first.close()
    second = SQLiteStore(db_path)
    assert second.get("a").state is JobState.PENDING
    with sqlite_file(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    second.close()


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        SQLiteStore(tmp_path / "nope" / "q.db")


def test_newer_schema_is_refused(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    import sqlite3

    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="schema version 99"):
        SQLiteStore(db_path)


@pytest.mark.parametrize(
    ("name", "params"), [("claim_next", ("w1", 1, 1, 1, 1)), ("has_due_work", (1,))]
)
def test_the_claim_and_the_due_check_use_the_ready_index(
    store: SQLiteStore, name: str, params: tuple[object, ...]
) -> None:
    with sqlite_file(store.location) as conn:
        plan = conn.execute("EXPLAIN QUERY PLAN " + SQL[name], params).fetchall()
    text = " ".join(str(row) for row in plan)
    assert "jobs_ready" in text and "TEMP B-TREE" not in text


def test_rows_become_jobs_by_column_name_whatever_the_order_of_the_columns(
    store: SQLiteStore,
) -> None:
    store.enqueue(spec(id="a", priority=3, max_retries=1), 3, NOW)
    names = [field.name for field in dataclasses.fields(Job)]
    with sqlite_file(store.location) as conn:
        shuffled = f"SELECT 'x' AS extra, {', '.join(reversed(names))} FROM jobs"
        assert JOBS.all(conn, shuffled) == [store.get("a")]
        with pytest.raises(LookupError, match=r"Job\.last_error"):
            JOBS.all(conn, f"SELECT {', '.join(names[:-1])} FROM jobs")


@pytest.mark.parametrize(
    "name",
    [
        "count_active_workers",
        "active_workers_among",
        "mark_workers_lost",
        "orphaned_jobs",
        "heartbeat_among",
        "list_active_workers",
        "active_workers_by_id",
        "prune_workers",
    ],
)
def test_statements_about_active_workers_name_the_active_statuses(name: str) -> None:
    active = "(" + ", ".join(f"'{status.value}'" for status in ACTIVE_WORKER_STATUSES) + ")"
    assert f"status IN {active}" in SQL[name] or f"status NOT IN {active}" in SQL[name]
