"""Screenshots of every pane, the job detail, the enqueue form with an error, and the help, on
the seeded demo queue at a fixed time: stable run after run."""

from __future__ import annotations

from textual.pilot import Pilot


def _before(settle, *keys: str):
    async def run(pilot: Pilot) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run


def test_jobs_pane(snap_compare, make_console, settle) -> None:
    assert snap_compare(make_console(), terminal_size=(100, 30), run_before=_before(settle))


def test_jobs_pane_at_80x24(snap_compare, make_console, settle) -> None:
    assert snap_compare(make_console(), terminal_size=(80, 24), run_before=_before(settle))


def test_jobs_pane_at_160x50(snap_compare, make_console, settle) -> None:
    """Wide: ids and worker ids whole, the command takes the rest."""
    assert snap_compare(make_console(), terminal_size=(160, 50), run_before=_before(settle))


def test_workers_pane_at_160x50(snap_compare, make_console, settle) -> None:
    app = make_console()
    assert snap_compare(app, terminal_size=(160, 50), run_before=_before(settle, "w"))


def test_a_running_job_s_live_output(snap_compare, make_console, settle) -> None:
    async def run(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("slash", *"import-orders", "enter")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.pause(0.5)  # the output is read at its own pace
        await settle(pilot)

    assert snap_compare(make_console(), terminal_size=(100, 30), run_before=run)


def test_failed_jobs_tab(snap_compare, make_console, settle) -> None:
    app = make_console()
    assert snap_compare(app, terminal_size=(100, 30), run_before=_before(settle, "4"))


def test_workers_pane(snap_compare, make_console, settle) -> None:
    app = make_console()
    assert snap_compare(app, terminal_size=(100, 30), run_before=_before(settle, "w"))


def test_dead_letters_pane(snap_compare, make_console, settle) -> None:
    app = make_console()
    assert snap_compare(app, terminal_size=(100, 30), run_before=_before(settle, "d"))


def test_job_detail(snap_compare, make_console, settle) -> None:
    async def run(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("slash", *"report-daily", "enter")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(make_console(), terminal_size=(100, 30), run_before=run)


def test_enqueue_form_with_error(snap_compare, make_console, settle) -> None:
    async def run(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        await pilot.press(*"echo hello", "tab", "tab")
        await pilot.press(*"high", "ctrl+s")
        await settle(pilot)

    assert snap_compare(make_console(), terminal_size=(100, 30), run_before=run)


def test_help(snap_compare, make_console, settle) -> None:
    app = make_console()
    assert snap_compare(app, terminal_size=(100, 30), run_before=_before(settle, "question_mark"))


def test_queues_pane(snap_compare, make_console, settle) -> None:
    app = make_console()
    assert snap_compare(app, terminal_size=(100, 30), run_before=_before(settle, "u"))


def test_schedules_pane_at_80x24(snap_compare, make_console, settle) -> None:
    app = make_console()
    assert snap_compare(app, terminal_size=(80, 24), run_before=_before(settle, "t"))


def test_schedules_pane_at_160x50(snap_compare, make_console, settle) -> None:
    app = make_console()
    assert snap_compare(app, terminal_size=(160, 50), run_before=_before(settle, "t"))
