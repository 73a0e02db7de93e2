"""The console's Schedules pane: every schedule with its timing in words, zone, countdown and
last job; P pauses and resumes, N runs one now, Enter opens the last job; the keys are in the
footer's registry, the help and the palette, and refused on other panes and when read-only."""

from __future__ import annotations

from demo_queue import DEMO_NOW
from textual.command import DiscoveryHit

from queuectl_tui.models import JobState
from queuectl_tui.tui.actions import ACTIONS, ActionCommands
from queuectl_tui.tui.data import Pane
from queuectl_tui.tui.screens.confirm import ConfirmScreen
from queuectl_tui.tui.screens.help import HelpScreen
from queuectl_tui.tui.screens.job_detail import JobDetailScreen


def _row(app, key: str) -> str:
    table = app.table_for(Pane.SCHEDULES)
    return " ".join(cell.plain for cell in table.get_row(key))


async def test_t_shows_every_schedule_with_its_next_and_last_job(console, settle) -> None:
    async with console(size=(160, 50)) as (app, pilot):
        await pilot.press("t")
        await settle(pilot)
        assert app.pane is Pane.SCHEDULES
        table = app.table_for(Pane.SCHEDULES)
        assert list(table.keys) == [
            "[red]hostile[/red]",
            "crm-sync",
            "daily-report",
            "db-backup",
            "thumbs-sweep",
            "weekly-digest",
        ]
        daily = _row(app, "daily-report")
        assert "At 06:00 AM" in daily and "Europe/Berlin" in daily
        assert "in 18h00m" in daily  # 06:00 in Berlin (summer) is 04:00 UTC; now is 10:00 UTC
        assert "report-daily" in daily and "completed" in daily
        assert "paused" in _row(app, "thumbs-sweep")
        assert "dead" in _row(app, "db-backup")
        # A name is text, never markup: the brackets are shown as they are.
        assert "[red]hostile[/red]" in _row(app, "[red]hostile[/red]")
        status = str(app.query_one("#schedules-status").render())
        assert "6 schedules" in status and "1 paused" in status


async def test_p_pauses_and_resumes_the_selected_schedule(console, demo_store, settle) -> None:
    async with console(size=(120, 40)) as (app, pilot):
        await pilot.press("t")
        await settle(pilot)
        app.table_for(Pane.SCHEDULES).select_key("crm-sync")
        await pilot.press("P")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)  # a pause is undone as easily
        assert demo_store.get_schedule("crm-sync").paused
        assert "paused" in _row(app, "crm-sync")
        await pilot.press("P")
        await settle(pilot)
        resumed = demo_store.get_schedule("crm-sync")
        assert not resumed.paused and resumed.next_at is not None
        actions = [(entry.face, entry.action) for entry in demo_store.actions()[:2]]
        assert actions == [("console", "schedule-resume"), ("console", "schedule-pause")]
        assert {q.name for q in demo_store.queues(DEMO_NOW) if q.paused} == set()  # not a queue


async def test_n_runs_the_selected_schedule_now_and_enter_opens_its_job(
    console, demo_store, settle
) -> None:
    async with console(size=(120, 40)) as (app, pilot):
        await pilot.press("t")
        await settle(pilot)
        app.table_for(Pane.SCHEDULES).select_key("weekly-digest")
        await pilot.press("enter")
        await settle(pilot)
        assert not isinstance(app.screen, JobDetailScreen)  # it made no job yet
        await pilot.press("N")
        await settle(pilot)
        last = demo_store.get_schedule("weekly-digest").last_job_id
        assert last is not None and last.startswith("weekly-digest@run-")
        assert demo_store.get(last).state is JobState.PENDING
        assert last[:40] in _row(app, "weekly-digest")  # its random tail may be cut
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen) and app.screen.job_id == last


async def test_schedule_keys_act_only_on_the_schedules_pane(console, demo_store, settle) -> None:
    async with console(size=(120, 40)) as (app, pilot):
        await pilot.press("N")  # the jobs pane: nothing to run
        await settle(pilot)
        assert all(
            s.last_job_id is None or "@run-" not in s.last_job_id for s in demo_store.schedules()
        )
        await pilot.press("u", "P")  # the queues pane: P is about the queue
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await settle(pilot)
        assert not any(s.paused for s in demo_store.schedules() if s.name != "thumbs-sweep")


async def test_read_only_refuses_schedule_changes(make_console, demo_store, settle) -> None:
    app = make_console(readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        app.table_for(Pane.SCHEDULES).select_key("crm-sync")
        await pilot.press("P", "N")
        await settle(pilot)
        assert not demo_store.get_schedule("crm-sync").paused
        assert demo_store.get_schedule("crm-sync").last_job_id == "sync-crm"


async def test_the_keys_are_in_the_help_and_the_palette(console, settle) -> None:
    async with console(size=(120, 40)) as (app, pilot):
        names = {spec.action for spec in ACTIONS}
        assert {"show_pane('schedules')", "toggle_schedule", "run_schedule"} <= names
        provider = ActionCommands(app.screen)
        titles = [
            str(hit.display) async for hit in provider.discover() if isinstance(hit, DiscoveryHit)
        ]
        assert any("Schedules  (t)" in title for title in titles)
        assert any("Run now  (N)" in title for title in titles)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        sections = dict(app.help_sections())
        assert ("N", "Make one job of the selected schedule now, outside its ticks") in sections[
            "Schedules"
        ]
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await settle(pilot)
        await pilot.press(*"Schedules", "enter")
        await settle(pilot)
        await pilot.pause(0.2)
        await settle(pilot)
        assert app.pane is Pane.SCHEDULES
