"""The workers pane as a control plane: how long each busy worker's job has run, Enter opens
that job, and workers that ended long ago are history, shown on `h`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from demo_queue import DEMO_NOW

from queuectl_tui.config import Settings
from queuectl_tui.models import JobSpec, JobState, Worker, WorkerStatus
from queuectl_tui.store import SQLiteStore
from queuectl_tui.timeutil import now_ms
from queuectl_tui.tui.data import Pane
from queuectl_tui.tui.screens.confirm import ConfirmScreen
from queuectl_tui.tui.screens.job_detail import JobDetailScreen

from helpers import clean_env, wait_until

HOUR = 3_600_000


async def test_workers_show_their_job_s_time_open_it_and_keep_history_apart(
    console, demo_store, settle
) -> None:
    old = DEMO_NOW - 3 * HOUR
    demo_store.register_workers(
        [Worker("w-gone", "pool-9", 99, "ops-1", WorkerStatus.STOPPED, old, old, old, None, 5, 0)]
    )
    async with console(size=(140, 30)) as (app, pilot):
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
    console, wait_for, monkeypatch
) -> None:
    import time

    from queuectl_tui.tui import app as console_module

    read = console_module.read_snapshot

    def slow(store, request, *args, **kwargs):  # type: ignore[no-untyped-def]
        if request.search:
            time.sleep(0.5)  # a search that scans a big queue
        return read(store, request, *args, **kwargs)

    monkeypatch.setattr(console_module, "read_snapshot", slow)
    async with console(size=(120, 30)) as (app, pilot):
        first_before = app.table_for(Pane.JOBS).keys[0]
        await pilot.press("slash", *"email-digest-78", "enter", "enter")  # one burst
        await wait_for(pilot, lambda: isinstance(app.screen, JobDetailScreen))
        assert app.screen.job_id == "email-digest-78" != first_before


def _pool_process(database: Path, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "queuectl_tui", "--db", str(database), "worker", "start"]
    with open(log, "wb") as out:
        return subprocess.Popen(
            [*command, "--count", "1", "--log-format", "json"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=clean_env(),
        )


@pytest.mark.slow
async def test_x_stops_the_selected_worker_s_pool_and_x_forces_another(
    tmp_path: Path, make_console, settle, wait_for
) -> None:
    path = tmp_path / "pools.db"
    store = SQLiteStore(path)
    pools = [_pool_process(path, tmp_path / f"pool-{n}.log") for n in (1, 2)]
    try:
        running = lambda: store.list_workers(active_only=True)  # noqa: E731
        wait_until(lambda: len(running()) == 2, timeout=60, what="two pools")
        store.enqueue(JobSpec(id="long", command="sleep 300"), 3, now_ms())
        busy = wait_until(lambda: store.get("long").worker_id, timeout=60, what="a claim")
        [idle] = [w for w in running() if w.id != busy]
        by_pid = {pool.pid: pool for pool in pools}
        app = make_console(Settings(database=str(path)), refresh=0.2, clock=now_ms)
        async with app.run_test(size=(160, 30)) as pilot:
            await settle(pilot)
            await pilot.press("w")
            await wait_for(pilot, lambda: idle.id in app.table_for(Pane.WORKERS).keys)
            app.table_for(Pane.WORKERS).select_key(idle.id)
            await pilot.press("x")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.title_text == f"Stop pool {idle.pool_id}?"
            await pilot.press("y")
            await wait_for(pilot, lambda: by_pid[idle.pid].poll() is not None, 30)
            assert by_pid[idle.pid].returncode == 0
            [forced] = running()
            assert forced.id == busy  # the other pool runs on
            app.table_for(Pane.WORKERS).select_key(busy)
            await pilot.press("X")
            await settle(pilot)
            assert app.screen.title_text == f"Force stop pool {forced.pool_id}?"
            assert "1 running command now" in app.screen.message.plain
            await pilot.press("y")
            await wait_for(pilot, lambda: by_pid[forced.pid].poll() is not None, 30)
        job = store.get("long")
        assert (job.state, job.attempts) == (JobState.PENDING, 0)
    finally:
        for pool in pools:
            if pool.poll() is None:
                pool.kill()
            pool.wait(timeout=30)
        store.close()


async def test_x_on_an_ended_worker_stops_nothing_and_says_why(console, demo_store, settle) -> None:
    async with console(size=(140, 30)) as (app, pilot):
        await pilot.press("w")
        await settle(pilot)
        app.table_for(Pane.WORKERS).select_key("w-old-1")  # stopped ten minutes ago
        await pilot.press("x")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("not running" in str(n.message) for n in app._notifications)
    assert demo_store.stop_requested_since(0, "any") is None
