"""The console under fast keys and slow reads: every key acts on what the operator sees.

A terminal hands the console a burst of keys at once (a paste, a fast typist, a script), and
reads land from a thread some time after the key that asked for them. `burst` queues keys the
way a terminal does, all before the first is handled; `reads` holds the background reads until
a test lets them go."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from demo_queue import DEMO_NOW
from test_console import shown
from textual import events
from textual.keys import _character_to_key
from textual.pilot import Pilot
from textual.widgets import Button, DataTable, Input, Static

from queuectl_tui.config import Settings
from queuectl_tui.lifecycle import RetryPolicy
from queuectl_tui.models import JobSpec, JobState, Outcome
from queuectl_tui.store import Settlement, SQLiteStore
from queuectl_tui.tui import app as console_module
from queuectl_tui.tui.app import QueueConsole
from queuectl_tui.tui.data import Pane
from queuectl_tui.tui.screens.confirm import ConfirmScreen
from queuectl_tui.tui.screens.enqueue import EnqueueScreen
from queuectl_tui.tui.screens.job_detail import JobDetailScreen
from queuectl_tui.tui.screens.start_pool import StartPoolScreen

NAMED_CHARACTERS = {"enter": "\r", "escape": "\x1b", "tab": "\t"}


def key_event(key: str) -> events.Key:
    if len(key) == 1:
        return events.Key(key if key.isalnum() else _character_to_key(key), key)
    return events.Key(key, NAMED_CHARACTERS.get(key))


async def burst(pilot: Pilot, *keys: str) -> None:
    """Queue keys as a terminal delivers one read of input: all before the first is handled;
    returns once the console has taken them all in (not necessarily handled them)."""
    for key in keys:
        pilot.app.post_message(key_event(key))
    await pilot.pause()


class ReadGate:
    """Wraps the console's snapshot read so that a test can hold reads in flight."""

    def __init__(self, read: Callable[..., object]) -> None:
        self._read = read
        self._open = threading.Event()
        self._open.set()

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def __call__(self, *args: object, **kwargs: object) -> object:
        self._open.wait(60)
        return self._read(*args, **kwargs)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReadGate]:
    gate = ReadGate(console_module.read_snapshot)
    monkeypatch.setattr(console_module, "read_snapshot", gate)
    yield gate
    gate.release()


@pytest.fixture
def pool_starts(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every attempt to launch a worker pool, refused so that no process starts."""
    import queuectl_tui.engine.detach as detach

    calls: list[object] = []

    def refuse(*args: object, **kwargs: object) -> object:
        calls.append(args)
        raise OSError("no pools in this test")

    monkeypatch.setattr(detach, "start_detached", refuse)
    return calls


async def until_ready(pilot, wait_for) -> None:
    """Wait until the dialog on top takes keys (keys typed before it could be read do not)."""
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "ready", True))


# -- keys right after a pane switch ------------------------------------------------------------
@pytest.mark.parametrize("keys", [["j"], ["j", "1"]])
async def test_text_typed_right_after_a_pane_switch_goes_into_the_filter(
    console, settle, pool_starts, keys
) -> None:
    async with console() as (app, pilot):
        await pilot.press("w")
        await settle(pilot)
        await burst(pilot, *keys, "/", *"hostile-clear")
        await settle(pilot)
        assert app.pane is Pane.JOBS
        assert app.query_one("#filter", Input).value == "hostile-clear"
        assert app.focused is app.query_one("#filter", Input)
        await burst(pilot, "enter", "enter")
        await settle(pilot)
        assert app.search == "hostile-clear"
        assert type(app.screen).__name__ == "Screen"  # no dialog, no job opened
        assert pool_starts == []


async def test_a_pane_switch_moves_the_focus_before_the_next_key(
    console, settle, wait_for, reads
) -> None:
    async with console() as (app, pilot):
        reads.hold()
        await burst(pilot, "d", "down", "down", "enter")
        await wait_for(pilot, lambda: not app.keys_pending)
        assert app.focused is app.table_for(Pane.DEAD)
        assert app.table_for(Pane.JOBS).cursor_row == 0  # the keys did not go to the old pane
        assert not isinstance(app.screen, JobDetailScreen)  # nor to rows not shown yet
        reads.release()
        await settle(pilot)
        assert app.table_for(Pane.DEAD).selected_key == "sync-crm"
        await pilot.press("down", "down")
        assert app.table_for(Pane.DEAD).selected_key == "hostile-output"


# -- dialogs take only keys pressed after they appeared ----------------------------------------
async def test_no_burst_of_keys_can_start_a_worker_pool(
    console, settle, wait_for, pool_starts
) -> None:
    async with console() as (app, pilot):
        await burst(pilot, *"hosts", "enter", "enter", "y")
        await settle(pilot)
        assert isinstance(app.screen, StartPoolScreen)
        await until_ready(pilot, wait_for)
        focused = app.focused
        assert isinstance(focused, Button) and focused.id == "cancel"  # the safe choice
        await pilot.press("enter")
        await settle(pilot)
        assert not isinstance(app.screen, StartPoolScreen)
        assert pool_starts == []


async def test_a_confirmation_ignores_keys_typed_before_it_appeared(
    console, demo_store, settle, wait_for
) -> None:
    async with console() as (app, pilot):
        await burst(pilot, "x", "y")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await until_ready(pilot, wait_for)
        await pilot.press("n")
        await settle(pilot)
        assert demo_store.stop_requested_since(0, "any") is None
        await pilot.press("d")
        await settle(pilot)
        await burst(pilot, "R", "tab", "enter", "y")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await settle(pilot)
        assert demo_store.counts()[JobState.DEAD] == 4
        await until_ready(pilot, wait_for)
        await pilot.press("y")
        await settle(pilot)
        assert demo_store.counts()[JobState.DEAD] == 0


async def test_the_enqueue_form_ignores_text_typed_before_it_appeared(
    console, demo_store, settle, wait_for
) -> None:
    async with console() as (app, pilot):
        total = sum(demo_store.counts().values())
        await burst(pilot, "n", *"echo hi", "enter")
        await settle(pilot)
        form = app.screen
        assert isinstance(form, EnqueueScreen)
        assert form.query_one("#input-command", Input).value == ""
        assert sum(demo_store.counts().values()) == total
        await until_ready(pilot, wait_for)
        await pilot.press(*"echo hi", "enter")
        await wait_for(pilot, lambda: sum(demo_store.counts().values()) == total + 1)


# -- retry all retries what it counted ---------------------------------------------------------
def bury(store: SQLiteStore, job_id: str) -> None:
    """Make a new dead job the way a pool would: one failed run and no retries left."""
    store.enqueue(JobSpec(id=job_id, command="false", priority=1000, max_retries=0), 0, DEMO_NOW)
    job = store.claim("w-build-1", 4242, DEMO_NOW + 1)
    assert job is not None and job.id == job_id
    settlement = Settlement(job, Outcome.FAILED, 1, "", "exit code 1", DEMO_NOW + 2)
    store.settle(settlement, RetryPolicy(2.0, 60.0))
    assert store.get(job_id).state is JobState.DEAD


async def test_retry_all_retries_exactly_the_jobs_it_counted(
    make_console, demo_store, settle, wait_for, monkeypatch
) -> None:
    from queuectl_tui.tui import operations

    monkeypatch.setattr(operations, "DEAD_IDS_PER_READ", 3, raising=False)  # ids over 2 reads
    app = make_console()
    said: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **_: said.append(str(message)))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("d", "R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.screen.title_text == "Retry 4 dead jobs?"
        bury(demo_store, "died-meanwhile")  # dead after the dialog counted
        demo_store.retry_dead(["backup-db"], DEMO_NOW + 3)  # retried elsewhere meanwhile
        await until_ready(pilot, wait_for)
        await pilot.press("y")
        await wait_for(pilot, lambda: any("pending again" in text for text in said))
        assert demo_store.get("died-meanwhile").state is JobState.DEAD
        for job_id in ("sync-crm", "video-encode-9", "hostile-output"):
            assert demo_store.get(job_id).state is JobState.PENDING
        assert demo_store.counts()[JobState.DEAD] == 1
        message = next(text for text in said if "pending again" in text)
        assert message == "3 dead jobs are pending again; 1 skipped: no longer dead."


# -- Enter acts on the rows of the current filter ----------------------------------------------
async def test_enter_right_after_a_filter_never_opens_a_row_of_the_old_list(
    console, settle, reads
) -> None:
    async with console() as (app, pilot):
        table = app.table_for(Pane.JOBS)
        assert table.selected_key not in ("webhook-5521", "sync-crm")
        reads.hold()
        await pilot.press("slash", *"curl", "enter")
        await pilot.press("enter")  # before the filtered rows have landed
        assert not isinstance(app.screen, JobDetailScreen)
        reads.release()
        await settle(pilot)
        assert table.keys == ["webhook-5521", "sync-crm"]
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen) and app.screen.job_id == "webhook-5521"


async def test_filter_text_and_enter_in_one_burst_filter_by_all_of_the_text(
    console, settle, wait_for, reads
) -> None:
    async with console() as (app, pilot):
        reads.hold()
        await burst(pilot, "/", *"curl", "enter", "enter")
        await wait_for(pilot, lambda: not app.keys_pending)
        assert app.search == "curl"
        assert app.focused is app.table_for(Pane.JOBS)
        assert not isinstance(app.screen, JobDetailScreen)
        reads.release()
        await settle(pilot)
        assert app.table_for(Pane.JOBS).keys == ["webhook-5521", "sync-crm"]


async def test_enter_right_after_a_state_tab_never_opens_a_row_of_the_old_tab(
    console, settle, reads
) -> None:
    async with console() as (app, pilot):
        reads.hold()
        await burst(pilot, "3", "enter")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, JobDetailScreen)
        reads.release()
        await settle(pilot)
        assert app.table_for(Pane.JOBS).keys == ["video-encode-10", "import-orders"]


# -- the page number belongs to the rows it is shown with --------------------------------------
@pytest.fixture
def thirty_jobs(tmp_path: Path) -> Settings:
    path = tmp_path / "thirty.db"
    store = SQLiteStore(path)
    for n in range(30):
        store.enqueue(JobSpec(id=f"job-{n:02d}", command=f"echo {n}"), 3, DEMO_NOW)
    store.close()
    return Settings(database=str(path))


def page_keys(page: int) -> list[str]:
    """The ids on `page` of thirty jobs, five a page, newest first."""
    top = 29 - 5 * (page - 1)
    return [f"job-{n:02d}" for n in range(top, top - 5, -1)]


async def test_fast_paging_shows_the_page_number_of_the_rows_shown(
    make_console, thirty_jobs, settle, reads
) -> None:
    app = make_console(thirty_jobs, page_size=5)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        status = app.query_one("#jobs-status", Static)
        reads.hold()
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert "page" not in shown(status)  # no page number without its rows
        assert app.table_for(Pane.JOBS).row_count == 0
        reads.release()
        await settle(pilot)
        assert "page 3 " in shown(status)
        assert app.table_for(Pane.JOBS).keys == page_keys(3)
        reads.hold()
        for _ in range(10):
            await pilot.press("right_square_bracket")
            await pilot.pause(0.05)
        reads.release()
        await settle(pilot)
        assert "page 6 " in shown(status)  # the last page: paging past it changes nothing
        assert app.table_for(Pane.JOBS).keys == page_keys(6)
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert "page 6 " in shown(status)
        assert app.table_for(Pane.JOBS).keys == page_keys(6)
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert "page 5 " in shown(status)
        assert app.table_for(Pane.JOBS).keys == page_keys(5)


# -- a running attempt is part of the history --------------------------------------------------
async def test_a_running_job_shows_its_attempt_in_progress(console, settle, wait_for) -> None:
    async with console() as (app, pilot):
        await pilot.press("slash", *"import-orders", "enter")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobDetailScreen) and screen.job is not None
        job = screen.job
        assert job.state is JobState.PROCESSING and job.attempts == 1
        attempts = screen.query_one("#attempts", DataTable)
        assert attempts.row_count == 1
        row = [cell.plain for cell in attempts.get_row_at(0)]
        assert row[0] == "1" and row[1] == "w-build-1" and row[5] == "running"
        assert row[3] == "42s"  # running for, by the console's clock
        await wait_for(pilot, lambda: "step 5/12" in shown(screen.query_one("#output")))
        output = shown(screen.query_one("#output"))
        assert "No attempts yet" not in output
        # What it printed so far, stderr's line among the rest, each whole.
        assert "[import-orders] step 3/12: parse\nwarning: 3 rows without a price" in output


async def test_news_of_a_change_that_arrives_as_the_console_closes_is_let_go(console) -> None:
    async with console() as (app, _):
        pass
    assert not app.screen_stack  # closed: its screens are gone, the listener may still tell
    app.on_queue_changed(console_module.QueueChanged())  # no error


async def test_a_timer_that_fires_as_the_console_closes_is_let_go(console, monkeypatch) -> None:
    # Textual takes the screen's widgets away one by one (`_close_all`) before it stops the
    # app's timers: a tick may come when the pane's table is gone and the header is not.
    fired: list[str] = []
    close_all = QueueConsole._close_all

    async def a_tick_midway(self: QueueConsole) -> None:
        await self.table_for(Pane.DEAD).remove()
        self.tick()
        self.timed_poll()
        fired.append("both")
        await close_all(self)

    monkeypatch.setattr(QueueConsole, "_close_all", a_tick_midway)
    async with console() as (app, pilot):
        await pilot.press("d")
        await pilot.pause()
        assert app.pane is Pane.DEAD
    assert fired == ["both"] and not app.screen_stack
