"""The console shows jobs whose stored values queuectl would never write itself (another
program, an old version, a hand edit) instead of crashing on them."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

from rich.console import Console
from textual.widgets import Static

from queuectl_tui.config import Settings
from queuectl_tui.models import JobSpec
from queuectl_tui.store import SQLiteStore
from queuectl_tui.tui.data import Pane
from queuectl_tui.tui.screens.job_detail import JobDetailScreen

INT64_MAX = 2**63 - 1
HOSTILE_TIMES = {
    "far-future": INT64_MAX,
    "far-past": -(2**63),
    "year-10000": 253_402_300_800_000,
    "year-0": -62_135_596_800_001,
}


def _hostile_database(path: Path) -> None:
    store = SQLiteStore(path)
    for job_id in HOSTILE_TIMES:
        store.enqueue(JobSpec(id=job_id, command="true"), 3, 1_000)
    store.close()
    with sqlite3.connect(path) as conn:
        for job_id, when in HOSTILE_TIMES.items():
            conn.execute(
                "UPDATE jobs SET state = 'failed', run_at = ?1, created_at = ?1, "
                "updated_at = ?1, claimed_at = ?1, finished_at = ?1, priority = ?2, "
                "max_retries = ?2, timeout = ?3, attempts = ?2, exit_code = ?2 WHERE id = ?4",
                (when, INT64_MAX, 1e308, job_id),
            )
            conn.execute(
                "INSERT INTO attempts (job_seq, number, scheduled_at, started_at, finished_at, "
                "outcome) SELECT seq, 1, ?1, ?1, ?2, 'failed' FROM jobs WHERE id = ?3",
                (when, INT64_MAX if when < 0 else -(2**63), job_id),
            )
            conn.execute(
                "INSERT INTO workers (id, pool_id, pid, host, status, started_at, "
                "last_heartbeat, current_job, jobs_done) VALUES (?1, 'p', ?2, 'h', 'busy', ?3, "
                "?3, ?1, ?2)",
                (job_id, INT64_MAX, when),
            )
        conn.execute("UPDATE jobs SET state = 'dead' WHERE id IN ('far-past', 'year-0')")


def _text_of(widget: Static) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def test_job_detail_shows_any_stored_time(tmp_path: Path, make_console, settle) -> None:
    path = tmp_path / "hostile.db"
    _hostile_database(path)
    app = make_console(Settings(database=str(path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.table_for(Pane.JOBS)
        assert sorted(table.keys) == sorted(HOSTILE_TIMES)
        for row, job_id in enumerate(table.keys):
            table.move_cursor(row=row)
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, JobDetailScreen)
            fields = _text_of(app.screen.query_one("#detail-fields", Static))
            assert job_id in fields
            assert "UTC" in fields
            await pilot.press("escape")
            await settle(pilot)
            assert not isinstance(app.screen, JobDetailScreen)


async def test_every_pane_shows_any_stored_value(tmp_path: Path, make_console, settle) -> None:
    path = tmp_path / "hostile.db"
    _hostile_database(path)
    app = make_console(Settings(database=str(path)))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        assert sorted(app.table_for(Pane.JOBS).keys) == sorted(HOSTILE_TIMES)
        await pilot.press("d")
        await settle(pilot)
        assert sorted(app.table_for(Pane.DEAD).keys) == ["far-past", "year-0"]
        await pilot.press("w")
        await settle(pilot)
        assert sorted(app.table_for(Pane.WORKERS).keys) == sorted(HOSTILE_TIMES)
