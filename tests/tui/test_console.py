"""The console driven from the keyboard with Pilot, checked against the database."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from demo_queue import HOSTILE_OUTPUT
from rich.console import Console
from rich.text import Text
from store_helpers import NOW, claim
from store_helpers import settle as settle_job
from textual.command import DiscoveryHit
from textual.widget import Widget
from textual.widgets import Button, Static

from queuectl_tui.config import Settings
from queuectl_tui.models import JobSpec, JobState, Outcome
from queuectl_tui.store import SQLiteStore
from queuectl_tui.tui.actions import ACTIONS, ActionCommands
from queuectl_tui.tui.data import Pane
from queuectl_tui.tui.screens.confirm import ConfirmScreen
from queuectl_tui.tui.screens.enqueue import EnqueueScreen, form_to_object
from queuectl_tui.tui.screens.job_detail import JobDetailScreen
from queuectl_tui.tui.widgets.output_log import OutputLog
from queuectl_tui.tui.widgets.summary import SummaryBar


def shown(widget: Widget) -> str:
    """The text a widget shows, as plain text."""
    if isinstance(widget, OutputLog):
        return "\n".join(line.text for line in widget.lines)
    if isinstance(widget, SummaryBar):
        return widget.plain_text()
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content if isinstance(widget, Static) else widget.render())
    return console.export_text()


async def test_dead_letter_retry_by_keyboard(console, demo_store, settle, wait_for) -> None:
    async with console() as (app, pilot):
        await pilot.press("d")
        await settle(pilot)
        table = app.table_for(Pane.DEAD)
        assert table.keys == ["sync-crm", "video-encode-9", "hostile-output", "backup-db"]
        await pilot.press("down", "r")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen) and "video-encode-9" in dialog.title_text
        assert "fresh retry budget" in dialog.message.plain
        await pilot.press("y")
        # The retry is written on a worker thread, and the pane follows the database.
        await wait_for(pilot, lambda: demo_store.get("video-encode-9").state is JobState.PENDING)
        await wait_for(pilot, lambda: "video-encode-9" not in table.keys)
        assert demo_store.get("sync-crm").state is JobState.DEAD


async def test_retry_all_asks_first_with_the_count(console, demo_store, settle) -> None:
    async with console() as (app, pilot):
        await pilot.press("d", "R")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert "4 dead jobs" in dialog.message.plain
        assert isinstance(app.focused, Button) and app.focused.id == "cancel"
        await pilot.press("enter")  # the focused, safe choice
        await settle(pilot)
        assert demo_store.counts()[JobState.DEAD] == 4
        await pilot.press("R")
        await settle(pilot)
        await pilot.press("tab", "enter")
        await settle(pilot)
        counts = demo_store.counts()
        assert counts[JobState.DEAD] == 0
        assert counts[JobState.PENDING] == 8


async def test_retry_all_with_a_filter_retries_only_the_matches(
    console, demo_store, settle
) -> None:
    async with console() as (app, pilot):
        await pilot.press("d", "slash", *"curl", "enter")
        await settle(pilot)
        assert app.table_for(Pane.DEAD).keys == ["sync-crm"]
        await pilot.press("R")
        await settle(pilot)
        assert "1 dead job matching curl" in app.screen.message.plain
        await pilot.press("y")
        await settle(pilot)
        assert demo_store.get("sync-crm").state is JobState.PENDING
        assert demo_store.counts()[JobState.DEAD] == 3


async def test_enqueue_form_rejects_bad_input_then_creates_the_job(
    console, demo_store, settle, wait_for
) -> None:
    async with console() as (app, pilot):
        await pilot.press("n")
        await settle(pilot)
        form = app.screen
        assert isinstance(form, EnqueueScreen)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert "field-command" in _invalid_fields(form)
        await pilot.press(*"echo from the form", "tab", *"form-job", "tab", *"high", "enter")
        await settle(pilot)
        assert app.screen is form
        assert _invalid_fields(form) == ["field-priority"]
        error = shown(form.query_one("#error-priority", Static))
        assert "field 'priority' must be an integer" in error
        assert demo_store.get("form-job") is None
        form.query_one("#input-priority").value = "7"
        form.query_one("#input-timeout").value = "-1"
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert _invalid_fields(form) == ["field-timeout"]
        form.query_one("#input-timeout").value = "30"
        await pilot.press("ctrl+s")
        await settle(pilot)
        job = demo_store.get("form-job")
        assert job is not None
        assert (job.command, job.priority, job.timeout) == ("echo from the form", 7, 30.0)
        assert not isinstance(app.screen, EnqueueScreen)
        await wait_for(pilot, lambda: "form-job" in app.table_for(Pane.JOBS).keys)
        assert app.table_for(Pane.JOBS).keys[0] == "form-job"


def _invalid_fields(form: EnqueueScreen) -> list[str]:
    return [field.id for field in form.query(".field.-invalid")]


async def test_enqueue_form_refuses_a_duplicate_id(console, demo_store, settle) -> None:
    async with console() as (app, pilot):
        await pilot.press("n", *"true", "tab", *"backup-db", "enter")
        await settle(pilot)
        assert _invalid_fields(app.screen) == ["field-id"]
        assert demo_store.get("backup-db").command.startswith("pg_dump")


def test_form_values_become_the_cli_json() -> None:
    now = 1_700_000_000_000
    values = {"command": "true", "priority": "3", "run_at": "+5m", "timeout": "1.5", "id": ""}
    assert form_to_object(values, now) == {
        "command": "true",
        "priority": 3,
        "run_at": "2023-11-14T22:18:20.000Z",
        "timeout": 1.5,
    }
    assert form_to_object({"max_retries": "two"}, now) == {"max_retries": "two"}


async def test_a_job_enqueued_by_another_process_appears_by_itself(
    make_console, demo_settings, wait_for, settle
) -> None:
    app = make_console(refresh=0.2)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        reads = app.reads
        await pilot.pause(0.6)
        assert app.reads == reads  # nothing changed: nothing was read
        job = json.dumps({"id": "from-outside", "command": "true"})
        subprocess.run(
            [
                sys.executable,
                "-m",
                "queuectl_tui",
                "--db",
                demo_settings.database,
                "enqueue",
                job,
            ],
            check=True,
            capture_output=True,
        )
        await wait_for(pilot, lambda: "from-outside" in app.table_for(Pane.JOBS).keys)
        assert app.table_for(Pane.JOBS).keys[0] == "from-outside"


async def test_a_change_shows_at_once_without_waiting_for_the_refresh_timer(
    make_console, demo_store, wait_for, settle
) -> None:
    app = make_console(refresh=3600)  # the timer never fires: only the change feed can tell
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        demo_store.enqueue(JobSpec(id="told-by-the-feed", command="true", priority=9), 3, 1)
        await wait_for(pilot, lambda: "told-by-the-feed" in app.table_for(Pane.JOBS).keys)


async def test_a_change_told_while_reads_are_held_back_is_read_later(
    make_console, demo_store, wait_for, settle
) -> None:
    app = make_console(refresh=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app._next_read_at = time.monotonic() + 1.0  # as after a slow read: reads wait a while
        demo_store.enqueue(JobSpec(id="held-back", command="true", priority=9), 3, 1)
        await wait_for(pilot, lambda: "held-back" in app.table_for(Pane.JOBS).keys)


async def test_the_cursor_stays_on_its_job_when_rows_arrive(
    make_console, demo_store, settle, wait_for
) -> None:
    app = make_console(refresh=0.2)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.table_for(Pane.JOBS)
        await pilot.press("down", "down", "down")
        assert table.selected_key == "email-digest-78"
        for index in range(3):
            demo_store.enqueue(JobSpec(id=f"new-{index}", command="true"), 3, 1)
        await wait_for(pilot, lambda: "new-2" in table.keys)
        assert table.selected_key == "email-digest-78"
        assert table.cursor_row == 6


async def test_hostile_markup_and_escapes_are_shown_literally(console, settle) -> None:
    async with console() as (app, pilot):
        await pilot.press("d", "down", "down")
        table = app.table_for(Pane.DEAD)
        assert table.selected_key == "hostile-output"
        command = table.cells_of("hostile-output")[-1]
        assert isinstance(command, Text)
        assert command.plain.startswith("printf '[red]x[/red]")
        error = table.cells_of("hostile-output")[5]  # after the mark
        assert error.plain == "exit code 3: [red]x[/red]\\x1b[2J"
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)
        output = shown(app.screen.query_one("#output", OutputLog))
        assert "[red]x[/red] \\x1b[31mred?\\x1b[0m" in output
        assert "[bold]not bold[/bold]" in output
        assert "\x1b" not in output
        screen = app.export_screenshot()
        assert "[red]x[/red]" in screen.replace("&#160;", " ")
        assert HOSTILE_OUTPUT.startswith("[red]x[/red]")


async def test_job_detail_shows_attempts_and_elapsed_time(console, settle) -> None:
    async with console() as (app, pilot):
        await pilot.press("3")
        await settle(pilot)
        assert app.table_for(Pane.JOBS).keys == ["video-encode-10", "import-orders"]
        await pilot.press("down", "enter")
        await settle(pilot)
        fields = shown(app.screen.query_one("#detail-fields", Static))
        assert "running for 42s" in fields
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, JobDetailScreen)
        assert app.table_for(Pane.JOBS).selected_key == "import-orders"


async def test_a_large_queue_loads_one_page_at_a_time(tmp_path: Path, make_console, settle) -> None:

    path = tmp_path / "big.db"
    store = SQLiteStore(path)
    total = 200_000
    batch = 50_000
    for start in range(0, total, batch):
        specs = [
            JobSpec(id=f"job-{n:06d}", command=f"echo {n}") for n in range(start, start + batch)
        ]
        store.enqueue_many(specs, 3, 1_000)
    store.close()
    app = make_console(Settings(database=str(path)), page_size=50)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.table_for(Pane.JOBS)
        assert app.snapshot is not None and len(app.snapshot.jobs) == 50
        assert table.row_count == 50
        assert table.keys[0] == "job-199999"
        status = shown(app.query_one("#jobs-status", Static))
        assert "1-50 of 200,000" in status
        await pilot.press("ctrl+end", "down")  # past the last row: the next page
        await settle(pilot)
        assert table.row_count == 50
        assert table.keys[0] == "job-199949"
        assert table.cursor_row == 0
        await pilot.press("up")  # before the first row: back a page, cursor on its last row
        await settle(pilot)
        assert table.keys[0] == "job-199999"
        assert table.selected_key == "job-199950"
        await pilot.press("slash", *"job-0012", "enter")
        await settle(pilot)
        assert table.row_count == 50
        assert all(key.startswith("job-0012") for key in table.keys)


async def test_read_only_hides_and_refuses_every_change(make_console, demo_store, settle) -> None:
    app = make_console(readonly=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        assert not isinstance(app.screen, EnqueueScreen)
        await pilot.press("d", "r", "R", "x", "s")
        await settle(pilot)
        assert demo_store.counts()[JobState.DEAD] == 4
        assert not isinstance(app.screen, ConfirmScreen)
        shown = {binding.action for (_, binding, enabled, _) in app.active_bindings.values()}
        mutating = {spec.action for spec in ACTIONS if spec.mutating}
        assert not shown & mutating
        app.action_new_job()
        await settle(pilot)
        assert not isinstance(app.screen, EnqueueScreen)


async def test_the_command_palette_offers_every_action(console, settle) -> None:
    async with console() as (app, pilot):
        provider = ActionCommands(app.screen)
        titles = [
            str(hit.display) async for hit in provider.discover() if isinstance(hit, DiscoveryHit)
        ]
        assert len(titles) == len(ACTIONS)
        hits = [hit async for hit in provider.search("retry all")]
        best = max(hits, key=lambda hit: hit.score)  # the palette shows the best first
        assert "Retry all" in best.text
        await pilot.press("ctrl+p")
        await settle(pilot)
        await pilot.press(*"Dead letters", "enter")
        await settle(pilot)
        await pilot.pause(0.2)
        await settle(pilot)
        assert app.pane is Pane.DEAD


async def test_freeze_stops_reading_until_resumed(make_console, demo_store, settle) -> None:
    app = make_console(refresh=0.1)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("f")
        assert "FROZEN" in shown(app.summary)
        demo_store.enqueue(JobSpec(id="while-paused", command="true"), 3, 1)
        await pilot.pause(0.5)
        await settle(pilot)
        assert "while-paused" not in app.table_for(Pane.JOBS).keys
        await pilot.press("f")
        await settle(pilot)
        assert "while-paused" in app.table_for(Pane.JOBS).keys


@pytest.mark.slow
async def test_start_and_stop_a_real_worker_pool(
    tmp_path: Path, make_console, settle, wait_for
) -> None:
    from queuectl_tui.engine.procfs import pid_alive
    from queuectl_tui.timeutil import now_ms

    path = tmp_path / "pool.db"
    demo_store = SQLiteStore(path)
    settings = Settings(database=str(path), heartbeat_interval=0.5)
    app = make_console(settings, refresh=0.2, clock=now_ms)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await wait_for(pilot, lambda: getattr(app.screen, "ready", False))
        await pilot.press("shift+tab", "backspace", "2", "enter")
        await wait_for(pilot, lambda: len(demo_store.list_workers(active_only=True)) == 2, 20)
        pids = {worker.pid for worker in demo_store.list_workers(active_only=True)}
        demo_store.enqueue(JobSpec(id="pool-job", command="echo pooled"), 3, 1)
        await wait_for(pilot, lambda: demo_store.get("pool-job").state is JobState.COMPLETED, 20)
        await pilot.press("w")
        await wait_for(pilot, lambda: app.snapshot.counts.active_workers == 2)
        await pilot.press("x")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await wait_for(pilot, lambda: not demo_store.list_workers(active_only=True), 20)
        await wait_for(pilot, lambda: not any(pid_alive(pid) for pid in pids), 20)
    demo_store.close()


async def test_heartbeat_ages_tick_without_reading(make_console, settle) -> None:
    from demo_queue import DEMO_NOW

    now = [DEMO_NOW]
    app = make_console(clock=lambda: now[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        table = app.table_for(Pane.WORKERS)
        assert table.cells_of("w-build-1")[4].plain.strip() == "1s ago"
        assert "STALE" in table.cells_of("w-batch-1")[3].plain
        assert "STALE" not in table.cells_of("w-build-1")[3].plain
        reads = app.reads
        now[0] += 9_000
        app.tick()
        await pilot.pause()
        assert table.cells_of("w-build-1")[4].plain.strip() == "10s ago"
        assert app.reads == reads  # the ages moved on without touching the database
        now[0] += 6_000
        app.tick()
        await pilot.pause()
        assert "STALE" in table.cells_of("w-build-1")[3].plain


async def test_read_only_palette_leaves_out_every_change(make_console, settle) -> None:
    app = make_console(readonly=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        provider = ActionCommands(app.screen)
        # A title shows as "Title" or "Title  (key)"; "Retry" must not match "Retry all".
        titles = {
            str(hit.display).split("  (")[0]
            async for hit in provider.discover()
            if isinstance(hit, DiscoveryHit)
        }
        for spec in ACTIONS:
            assert (spec.title in titles) == (not spec.mutating), spec.title


async def test_the_bar_says_the_database_is_lost_while_reads_fail(
    make_console, demo_store, settle, monkeypatch
) -> None:
    from queuectl_tui.store import StoreError

    app = make_console(refresh=0.1)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert "● live" in shown(app.summary)
        reads = app.reads

        token = app.reader.change_token
        down = [True]

        def unreachable() -> int:
            if down[0]:
                raise StoreError("no connection to postgresql://db/test within 1 s")
            return token()

        monkeypatch.setattr(app.reader, "change_token", unreachable)
        app.poll(force=True)
        await settle(pilot)
        bar = shown(app.summary)
        assert "● live" not in bar and "DATABASE LOST" in bar, bar
        assert app.reads == reads
        down[0] = False
        app.poll(force=True)
        await settle(pilot)
        assert "● live" in shown(app.summary)
        assert "DATABASE LOST" not in shown(app.summary)


async def test_the_enqueue_form_takes_a_queue_and_an_idempotency_key(
    console, demo_store, settle, wait_for
) -> None:
    async with console(size=(100, 40)) as (app, pilot):
        await pilot.press("n")
        await settle(pilot)
        form = app.screen
        form.query_one("#input-command").value = "./report"
        form.query_one("#input-id").value = "report-1"
        form.query_one("#input-queue").value = "bad queue"
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert _invalid_fields(form) == ["field-queue"]
        form.query_one("#input-queue").value = "reports"
        form.query_one("#input-idempotency_key").value = "nightly-2026-12-03"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: demo_store.get("report-1") is not None)
        job = demo_store.get("report-1")
        assert (job.queue, job.idempotency_key) == ("reports", "nightly-2026-12-03")
        await settle(pilot)
        await pilot.press("n")  # the same key again: nothing is added, and the console says so
        await settle(pilot)
        again = app.screen
        again.query_one("#input-command").value = "./report"
        again.query_one("#input-idempotency_key").value = "nightly-2026-12-03"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, EnqueueScreen))
        assert len(demo_store.list_jobs(queue="reports", limit=10)) == 1


async def test_dead_letters_are_listed_by_time_of_death(
    tmp_path: Path, make_console, settle
) -> None:

    from queuectl_tui.config import Settings
    from queuectl_tui.store import SQLiteStore

    store = SQLiteStore(tmp_path / "deaths.db")
    store.enqueue_many([JobSpec(id=i, command="false", max_retries=0) for i in "abc"], 3, NOW)
    for died in (300, 100, 200):  # a, b, c
        settle_job(store, claim(store), Outcome.FAILED, now=NOW + died, exit_code=1)
    store.close()
    app = make_console(Settings(database=str(tmp_path / "deaths.db")))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        assert app.table_for(Pane.DEAD).keys == ["a", "c", "b"]
