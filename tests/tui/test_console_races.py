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
from test_console import shown
from textual import events
from textual.app import App
from textual.keys import _character_to_key
from textual.widgets import Button, Input, Static

from queuectl_tui.config import Settings
from queuectl_tui.models import JobSpec, JobState, Outcome
from queuectl_tui.store import Settlement, SQLiteStore
from queuectl_tui.tui import app as console_module
from queuectl_tui.tui.data import Pane
from queuectl_tui.tui.demo import DEMO_NOW
from queuectl_tui.tui.screens.confirm import ConfirmScreen
from queuectl_tui.tui.screens.enqueue import EnqueueScreen
from queuectl_tui.tui.screens.job_detail import JobDetailScreen
from queuectl_tui.tui.screens.start_pool import StartPoolScreen

NAMED_CHARACTERS = {"enter": "\r", "escape": "\x1b", "tab": "\t"}


def key_event(key: str) -> events.Key:
    if len(key) == 1:
        return events.Key(key if key.isalnum() else _character_to_key(key), key)
    return events.Key(key, NAMED_CHARACTERS.get(key))


def burst(app: App[None], *keys: str) -> None:
    """Queue keys as a terminal delivers one read of input: all before the first is handled."""
    for key in keys:
        app.post_message(key_event(key))


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
    import queuectl_tui.engine.pool as pool

    calls: list[object] = []

    def refuse(*args: object, **kwargs: object) -> object:
        calls.append(args)
        raise OSError("no pools in this test")

    monkeypatch.setattr(pool, "start_detached", refuse)
    return calls


async def until_ready(pilot, wait_for) -> None:
    """Wait until the dialog on top takes keys (keys typed before it could be read do not)."""
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "ready", True))


# -- a running attempt is part of the history --------------------------------------------------
async def test_a_running_job_shows_its_attempt_in_progress(make_console, settle) -> None:
    app = make_console()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"import-orders", "enter")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobDetailScreen) and screen.job is not None
        job = screen.job
        assert job.state is JobState.PROCESSING and job.attempts == 1
        attempts = screen.query_one("#attempts")
        assert attempts.row_count == 1
        row = [cell.plain for cell in attempts.get_row_at(0)]
        assert row[0] == "1" and row[1] == "w-build-1" and row[5] == "running"
        assert row[3] == "42s"  # running for, by the console's clock
        output = shown(screen.query_one("#output", Static))
        assert "No attempts yet" not in output
        assert "Attempt 1 is running on w-build-1 since" in output
