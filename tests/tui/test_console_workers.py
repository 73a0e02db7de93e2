"""The workers pane as a control plane: how long each busy worker's job has run, Enter opens
that job, and workers that ended long ago are history, shown on `h`."""

from __future__ import annotations

from queuectl_tui.models import Worker, WorkerStatus
from queuectl_tui.tui.data import Pane
from queuectl_tui.tui.demo import DEMO_NOW
from queuectl_tui.tui.screens.job_detail import JobDetailScreen

HOUR = 3_600_000


async def test_workers_show_their_job_s_time_open_it_and_keep_history_apart(
    make_console, demo_store, settle
) -> None:
    old = DEMO_NOW - 3 * HOUR
    demo_store.register_workers(
        [Worker("w-gone", "pool-9", 99, "ops-1", WorkerStatus.STOPPED, old, old, old, None, 5, 0)]
    )
    app = make_console()
    async with app.run_test(size=(140, 30)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        table = app.table_for(Pane.WORKERS)
        assert "w-gone" not in table.keys and "w-old-1" in table.keys  # ended 10 min ago
        running = [cell.plain.strip() for cell in table.cells_of("w-build-1")]
        assert running[5] == "import-orders" and running[6] == "42s"
        await pilot.press("h")
        await settle(pilot)
        assert "w-gone" in table.keys
        assert "every stored worker" in str(app.query_one("#workers-status").render())
        table.select_key("w-build-1")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen) and app.screen.job_id == "import-orders"


async def test_enter_right_after_a_slow_search_opens_a_job_the_search_shows(
    make_console, settle, wait_for, monkeypatch
) -> None:
    import time

    from queuectl_tui.tui import app as console_module

    read = console_module.read_snapshot

    def slow(store, request, *args, **kwargs):  # type: ignore[no-untyped-def]
        if request.search:
            time.sleep(0.5)  # a search that scans a big queue
        return read(store, request, *args, **kwargs)

    monkeypatch.setattr(console_module, "read_snapshot", slow)
    app = make_console()
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        first_before = app.table_for(Pane.JOBS).keys[0]
        await pilot.press("slash", *"email-digest-78", "enter", "enter")  # one burst
        await wait_for(pilot, lambda: isinstance(app.screen, JobDetailScreen))
        assert app.screen.job_id == "email-digest-78" != first_before
