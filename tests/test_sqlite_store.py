"""SQLite's own checks, apart from the store contract: its files, its schema versions, its
query plans, and what SQL written by hand around the store leaves intact."""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import NOW, POLICY, claim, settle, sqlite_file, sqlite_steps

from queuectl_tui.models import ACTIVE_WORKER_STATUSES, Job, JobState, Outcome
from queuectl_tui.store import SQLiteStore, StoreError
from queuectl_tui.store.rows import JOBS
from queuectl_tui.store.sqlite import claims, ready
from queuectl_tui.store.sqlite.schema import APPLICATION_ID, MIGRATIONS
from queuectl_tui.store.sqlite.statements import CHUNK, LIST, SQL, with_list

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


def _database_at_version(path: Path, version: int) -> sqlite3.Connection:
    """A database as queuectl left it at schema `version` (its migrations only)."""
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:version]:
        conn.executescript(migration.script)
    conn.execute(f"PRAGMA user_version = {version}")
    return conn


_V1_ROWS = """
INSERT INTO jobs (seq, id, command, state, run_at, max_retries, attempts, runs, created_at,
                  updated_at, finished_at, exit_code, last_error)
VALUES (1, 'ok', 'true', 'completed', 1, 3, 1, 1, 1, 2, 2, 0, NULL),
       (2, 'bad', 'false', 'failed', 5, 3, 1, 1, 1, 2, NULL, 1, 'exit code 1'),
       (3, 'stopped', 'sleep 9', 'pending', 1, 3, 0, 1, 1, 2, NULL, NULL, NULL);
UPDATE state_counts SET n = 1 WHERE state IN ('completed', 'failed');
UPDATE state_counts SET n = 1 WHERE state = 'pending';
INSERT INTO attempts (job_seq, number, scheduled_at, started_at, finished_at, exit_code, outcome,
                      output, error)
VALUES (1, 1, 1, 1, 180000100, 0, 'completed', 'hi', NULL),
       (2, 1, 1, 1, 180000101, 1, 'failed', '', 'exit code 1'),
       (3, 1, 1, 1, 180000102, NULL, 'cancelled', '', 'cancelled by a forced shutdown');
"""


def test_an_earlier_database_gets_its_attempt_totals_when_it_is_opened(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    with contextlib.closing(_database_at_version(path, 1)) as conn:
        conn.executescript(_V1_ROWS)
    with SQLiteStore(path) as store:
        stats = store.stats(180_001_000)
        assert (stats.attempts_total, stats.attempts_failed) == (3, 1)
        assert stats.completed_per_minute[-1] == 1 and stats.failed_per_minute[-1] == 1


def test_a_version_2_database_keeps_every_job_and_attempt_and_names_shutdowns_interrupted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v2.db"
    with contextlib.closing(_database_at_version(path, 2)) as conn:
        conn.executescript(_V1_ROWS)
    with SQLiteStore(path) as store:
        assert [job.id for job in store.list_jobs()] == ["ok", "bad", "stopped"]
        assert {job.queue for job in store.list_jobs()} == {"default"}
        assert [a.outcome for a in store.attempts("stopped")] == [Outcome.INTERRUPTED]
        assert store.attempts("ok")[0].output == "hi"  # the rebuilt table kept its attempts
        counts = store.counts()
        assert (counts[JobState.COMPLETED], counts[JobState.FAILED]) == (1, 1)
        assert counts[JobState.PENDING] == 1 and counts[JobState.CANCELLED] == 0
        [queue] = store.queues(10)
        assert (queue.name, queue.waiting, queue.paused) == ("default", 2, False)
        job = claim(store, now=10)
        assert job.id in ("bad", "stopped")  # claimable as before
    with sqlite_file(path) as conn:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_version_3_database_splits_its_attempt_counters_by_queue_keeping_the_totals(
    tmp_path: Path,
) -> None:
    """Attempts still on record go to their job's queue; those of jobs deleted since stay
    counted, under 'default'."""
    path = tmp_path / "v3.db"
    with contextlib.closing(_database_at_version(path, 3)) as conn:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")  # as every version 3 has
        conn.execute("PRAGMA foreign_keys = ON")  # deleting a job deletes its attempts
        conn.executescript(
            """
            INSERT INTO jobs (seq, id, command, state, run_at, max_retries, attempts, runs,
                              created_at, updated_at, finished_at, exit_code, queue)
            VALUES (1, 'r1', 'true', 'completed', 1, 3, 1, 1, 1, 2, 2, 0, 'reports'),
                   (2, 'd1', 'true', 'completed', 1, 3, 1, 1, 1, 2, 2, 0, 'default'),
                   (3, 'gone', 'true', 'completed', 1, 3, 1, 1, 1, 2, 2, 0, 'reports');
            INSERT INTO attempts (job_seq, number, scheduled_at, started_at, finished_at,
                                  exit_code, outcome, output)
            VALUES (1, 1, 1, 1, 180000100, 0, 'completed', ''),
                   (2, 1, 1, 1, 180000101, 1, 'failed', ''),
                   (2, 2, 1, 1, 180000102, 0, 'completed', ''),
                   (3, 1, 1, 1, 180000103, 0, 'completed', '');
            DELETE FROM jobs WHERE id = 'gone';
            """
        )
    with SQLiteStore(path) as store:
        every = store.stats(180_001_000)
        assert (every.attempts_total, every.attempts_failed, every.retries) == (4, 1, 1)
        assert every.completed_per_minute[-1] == 3 and every.failed_per_minute[-1] == 1
        reports = store.stats(180_001_000, queue="reports")
        assert (reports.attempts_total, reports.completed_per_minute[-1]) == (1, 1)
        default = store.stats(180_001_000, queue="default")
        assert (default.attempts_total, default.attempts_failed, default.retries) == (3, 1, 1)
        assert default.completed_per_minute[-1] == 2


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
    ("name", "params"),
    [
        ("claim_next", {"worker_id": "w1", "worker_pid": 1, "now": 1, "queue": "default"}),
        ("first_waiting", {"queue": "default"}),
        ("first_of_level", {"queue": "default", "priority": 0}),
        ("waiting_levels", {"queue": "default", "now": 1, "most": 33}),
        ("best_due_scan", {"queue": "default", "now": 1}),
        ("earliest_scan", {"queue": "default", "after": 1}),
    ],
)
def test_the_claim_and_the_due_check_use_the_ready_index(
    store: SQLiteStore, name: str, params: dict[str, object]
) -> None:
    with sqlite_file(store.location) as conn:
        plan = conn.execute("EXPLAIN QUERY PLAN " + SQL[name], params).fetchall()
    text = " ".join(str(row) for row in plan)
    assert "jobs_ready" in text and "TEMP B-TREE" not in text


def test_jobs_scheduled_for_later_are_not_walked_to_find_a_due_one(store: SQLiteStore) -> None:
    """Jobs of a higher priority waiting for their run_at sit ahead of the due ones in the
    ready index; the claim, the due check, the next wake-up and the oldest due job must seek
    past them, not read them one by one."""
    late_text = "2030-01-01T00:00:00Z"
    late = spec(run_at=late_text).run_at
    store.enqueue(spec(id="due", priority=1), 3, NOW)
    costs: list[dict[str, int]] = []
    waiting_later = 0
    for count in (10, 5_000):
        store.enqueue_many(
            [spec(priority=5, run_at=late_text) for _ in range(count - waiting_later)], 3, NOW
        )
        waiting_later = count
        with sqlite_file(store.location) as conn:
            assert ready.best_due(conn, "default", NOW) is not None
            assert ready.next_run_at(conn, NOW) == late
            assert ready.oldest_due(conn, "default", NOW) == NOW
            costs.append(
                {
                    "best_due": sqlite_steps(conn, lambda: ready.best_due(conn, "default", NOW)),
                    "due_work": sqlite_steps(conn, lambda: claims.has_due_work(conn, None, NOW)),
                    "next_run_at": sqlite_steps(conn, lambda: ready.next_run_at(conn, NOW)),
                    "oldest_due": sqlite_steps(
                        conn, lambda: ready.oldest_due(conn, "default", NOW)
                    ),
                }
            )
    few, many = costs
    assert all(many[name] <= 2 * few[name] + 2 for name in few), (few, many)
    job = claim(store, now=NOW)
    assert job is not None and job.id == "due"
    assert claim(store, "w2", now=NOW) is None


def test_statements_over_a_list_of_ids_look_each_id_up(store: SQLiteStore) -> None:
    """Whatever the list's length and however many jobs share a state, a statement given ids
    finds them by the id index, not by reading every job of a state (once per chunk)."""
    store.enqueue_many([spec() for _ in range(2000)], 3, NOW)
    names = [name for name, text in SQL.items() if LIST in text and " jobs " in f" {text} "]
    assert "cancel_waiting_among" in names and "delete_in_state_among" in names
    with sqlite_file(store.location) as conn:
        for name in names:
            for count in (1, CHUNK):
                statement = with_list(name, count)
                values = ["x"] * statement.count("?")
                plan = conn.execute("EXPLAIN QUERY PLAN " + statement, values).fetchall()
                text = " ".join(row[3] for row in plan)
                assert "(id=?)" in text or "(rowid=?)" in text, (name, count, text)


def test_a_queue_of_many_priority_levels_is_read_by_a_scan(
    store: SQLiteStore,
) -> None:
    """Past MAX_LEVELS distinct priorities the readers scan instead of seeking level by
    level, and their answers stay right."""
    late = "2030-01-01T00:00:00Z"
    store.enqueue(spec(id="due", priority=-1), 3, NOW)
    store.enqueue_many([spec(priority=p, run_at=late) for p in range(200)], 3, NOW)
    with sqlite_file(store.location) as conn:
        assert ready.levels(conn, "default", NOW) is None
        assert ready.best_due(conn, "default", NOW) == (-1, NOW, store.get("due").seq)
        assert ready.oldest_due(conn, "default", NOW) == NOW
        assert ready.next_run_at(conn, NOW) == spec(run_at=late).run_at


def test_rows_become_jobs_by_column_name_whatever_the_order_of_the_columns(
    store: SQLiteStore,
) -> None:
    store.enqueue(spec(id="a", priority=3, max_retries=1), 3, NOW)
    names = [field.name for field in dataclasses.fields(Job)]
    with sqlite_file(store.location) as conn:
        shuffled = f"SELECT 'x' AS extra, {', '.join(reversed(names))} FROM jobs"
        assert JOBS.all(conn, shuffled) == [store.get("a")]
        with pytest.raises(LookupError, match=rf"Job\.{names[-1]}"):
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
