"""The console's control of the selected job and its queue: cancel, delete, retry now, pause
and resume; each asks first, names what it touches, and is in the audit trail."""

from __future__ import annotations

from queuectl_tui.models import JobState
from queuectl_tui.tui.data import Pane
from queuectl_tui.tui.screens.confirm import ConfirmScreen


async def _answer_yes(pilot, settle) -> None:
    await settle(pilot)
    assert isinstance(pilot.app.screen, ConfirmScreen)
    await pilot.press("y")
    await settle(pilot)


async def test_c_cancels_the_selected_waiting_job_after_asking(console, demo_store, settle) -> None:
    async with console() as (app, pilot):
        await pilot.press("2")  # pending jobs
        await settle(pilot)
        job_id = app.table_for(Pane.JOBS).selected_key
        await pilot.press("c")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert job_id in dialog.title_text and "ends cancelled" in dialog.message.plain
        await pilot.press("n")  # no: nothing changes
        await settle(pilot)
        assert demo_store.get(job_id).state is JobState.PENDING
        await pilot.press("c")
        await _answer_yes(pilot, settle)
        assert demo_store.get(job_id).state is JobState.CANCELLED
        [entry] = demo_store.actions()
        assert (entry.face, entry.action, entry.subject) == ("console", "cancel", job_id)


async def test_c_on_a_running_job_asks_its_pool_to_stop_it(console, demo_store, settle) -> None:
    async with console() as (app, pilot):
        await pilot.press("3")  # processing
        await settle(pilot)
        job_id = app.table_for(Pane.JOBS).selected_key
        await pilot.press("c")
        await settle(pilot)
        assert "its pool stops every process" in app.screen.message.plain
        await _answer_yes(pilot, settle)
        assert demo_store.cancel_requested([job_id]) == [job_id]


async def test_shift_d_deletes_a_finished_job_and_refuses_a_running_one(
    console, demo_store, settle
) -> None:
    async with console() as (app, pilot):
        await pilot.press("3")
        await settle(pilot)
        running = app.table_for(Pane.JOBS).selected_key
        await pilot.press("D")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)  # refused, with a notice
        assert demo_store.get(running).state is JobState.PROCESSING
        await pilot.press("d")  # the dead letters
        await settle(pilot)
        dead = app.table_for(Pane.DEAD).selected_key
        await pilot.press("D")
        await settle(pilot)
        assert "cannot be undone" in app.screen.message.plain
        await _answer_yes(pilot, settle)
        assert demo_store.get(dead) is None
        assert dead not in app.table_for(Pane.DEAD).keys


async def test_r_runs_a_failed_job_now(console, demo_store, settle, wait_for) -> None:
    async with console() as (app, pilot):
        await pilot.press("4")  # failed
        await settle(pilot)
        job_id = app.table_for(Pane.JOBS).selected_key
        attempts = demo_store.get(job_id).attempts
        await pilot.press("r")
        await settle(pilot)
        assert "it runs now, its attempts kept" in app.screen.message.plain
        await pilot.press("y")
        await wait_for(pilot, lambda: demo_store.actions())  # the write runs on a worker
        job = demo_store.get(job_id)
        assert job.state is JobState.FAILED and job.attempts == attempts
        assert job.run_at <= demo_store.actions()[0].at  # ready from the moment it was asked


async def test_shift_p_pauses_and_resumes_the_selected_job_s_queue(
    console, demo_store, settle
) -> None:
    async with console() as (app, pilot):
        queue = app.selected_job().queue
        await pilot.press("P")
        await settle(pilot)
        assert f"Pause queue {queue}?" == app.screen.title_text
        await _answer_yes(pilot, settle)
        [info] = [q for q in demo_store.queues(0) if q.name == queue]
        assert info.paused
        await pilot.press("P")
        await settle(pilot)
        assert f"Resume queue {queue}?" == app.screen.title_text
        await _answer_yes(pilot, settle)
        [info] = [q for q in demo_store.queues(0) if q.name == queue]
        assert not info.paused
        assert [e.action for e in demo_store.actions()] == ["resume", "pause"]


async def test_read_only_refuses_every_control_key(make_console, demo_store, settle) -> None:
    app = make_console(readonly=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        for key in ("c", "D", "P", "r"):
            await pilot.press(key)
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)
        assert demo_store.actions() == []


async def test_the_queues_pane_lists_queues_and_shift_p_pauses_the_selected_one(
    console, demo_store, settle
) -> None:
    from helpers import spec

    demo_store.enqueue(spec(id="nightly", queue="reports"), 3, 1)
    async with console() as (app, pilot):
        await pilot.press("u")
        await settle(pilot)
        table = app.table_for(Pane.QUEUES)
        assert table.keys == ["default", "reports"]
        await pilot.press("down", "P")
        await settle(pilot)
        assert app.screen.title_text == "Pause queue reports?"
        assert "1 waiting job" in app.screen.message.plain
        await _answer_yes(pilot, settle)
        assert [q.paused for q in demo_store.queues(0)] == [False, True]
        await pilot.press("c")  # a job's action: not on this pane
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)


async def test_shift_l_sets_and_lifts_the_selected_queue_s_limit(
    console, demo_store, settle, wait_for
) -> None:
    from queuectl_tui.tui.screens.queue_limit import QueueLimitScreen

    def dialog_ready() -> bool:  # keys typed before the dialog takes them are not read
        screen = app.screen
        return isinstance(screen, QueueLimitScreen) and screen.ready

    def limit() -> int | None:
        [queue] = demo_store.queues(0)
        return queue.max_running

    async with console() as (app, pilot):
        await pilot.press("u")
        await settle(pilot)
        await pilot.press("L")
        await wait_for(pilot, dialog_ready)
        await pilot.press("shift+tab", "ctrl+a", "ctrl+k", *"0", "enter")
        await settle(pilot)
        assert isinstance(app.screen, QueueLimitScreen)  # 0 is refused, beside the field
        await pilot.press("ctrl+a", "ctrl+k", *"2", "enter")
        await wait_for(pilot, lambda: limit() == 2)
        await wait_for(pilot, lambda: not isinstance(app.screen, QueueLimitScreen))
        await pilot.press("L")
        await wait_for(pilot, dialog_ready)
        await pilot.press("shift+tab", "ctrl+a", "ctrl+k", *"none", "enter")
        await wait_for(pilot, lambda: limit() is None)
        assert [e.subject for e in demo_store.actions()] == [
            "default max_running=none",
            "default max_running=2",
        ]


async def test_shift_k_prunes_after_saying_how_many_jobs_go(console, demo_store, settle) -> None:
    from queuectl_tui.tui.screens.prune import PruneScreen

    completed = demo_store.counts()[JobState.COMPLETED]
    async with console() as (app, pilot):
        await pilot.press("K")
        await settle(pilot)
        assert isinstance(app.screen, PruneScreen)
        await pilot.press("shift+tab", "ctrl+a", "ctrl+k", *"1s", "enter")  # the age field
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert dialog.title_text == f"Prune {completed:,} jobs?"
        await pilot.press("y")
        await settle(pilot)
        assert demo_store.counts()[JobState.COMPLETED] == 0
        assert demo_store.counts()[JobState.DEAD] > 0  # not asked for
        [entry] = demo_store.actions()
        assert (entry.face, entry.action, entry.touched) == ("console", "prune", completed)


async def test_r_in_a_dead_job_s_detail_asks_then_retries(console, demo_store, settle) -> None:
    async with console() as (app, pilot):
        await pilot.press("d")
        await settle(pilot)
        job_id = app.table_for(Pane.DEAD).selected_key
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen) and job_id in app.screen.title_text
        await pilot.press("y")
        await settle(pilot)
        assert demo_store.get(job_id).state is JobState.PENDING


async def test_enter_on_a_queue_shows_its_jobs_and_esc_shows_every_queue(
    console, demo_store, settle
) -> None:
    from helpers import spec

    demo_store.enqueue(spec(id="nightly", queue="reports"), 3, 1)
    async with console() as (app, pilot):
        await pilot.press("u")
        await settle(pilot)
        await pilot.press("down", "enter")
        await settle(pilot)
        assert app.pane is Pane.JOBS
        assert app.table_for(Pane.JOBS).keys == ["nightly"]
        status = str(app.query_one("#jobs-status").render())
        assert "queue reports" in status and "1-1 of 1" in status
        await pilot.press("escape")
        await settle(pilot)
        assert len(app.table_for(Pane.JOBS).keys) > 1
