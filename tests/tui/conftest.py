"""Fixtures for the console's tests: a seeded demo database, a console on it with a fixed
clock, no cursor blink and no animation, and a way to wait until a background read has landed."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from demo_queue import DEMO_NOW, seed_demo
from textual.app import App, ScreenStackError
from textual.pilot import Pilot
from textual.widgets import Input

from queuectl_tui.config import Settings
from queuectl_tui.store import SQLiteStore
from queuectl_tui.tui.app import QueueConsole

MakeConsole = Callable[..., QueueConsole]
RunConsole = Callable[..., contextlib.AbstractAsyncContextManager[tuple[QueueConsole, Pilot]]]


@pytest.fixture(autouse=True)
def steady_cursor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs do not blink in these tests, so that screenshots do not depend on the moment."""
    made = Input.__init__

    def steady(self: Input, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self.cursor_blink = False

    monkeypatch.setattr(Input, "__init__", steady)


@pytest.fixture
def demo_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """A seeded database named by a relative path, so screenshots do not show tmp paths."""
    monkeypatch.chdir(tmp_path)
    store = SQLiteStore(tmp_path / "queue.db")
    seed_demo(store)
    store.close()
    return Settings(database="queue.db")


@pytest.fixture
def demo_store(demo_settings: Settings, tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "queue.db")
    yield store
    store.close()


@pytest.fixture
def make_console(demo_settings: Settings) -> MakeConsole:
    def make(settings: Settings | None = None, **options: object) -> QueueConsole:
        options.setdefault("clock", lambda: DEMO_NOW)
        console = QueueConsole(settings or demo_settings, **options)  # type: ignore[arg-type]
        console.animation_level = "none"  # tabs switch at once: no frame depends on timing
        return console

    return make


async def _settle(pilot: Pilot, rounds: int = 3) -> None:
    """Let pending background reads finish and their results render."""
    app = pilot.app
    for index in range(200):
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        busy = getattr(app, "reading", False) or getattr(app, "keys_pending", False)
        if index + 1 >= rounds and not busy:
            break
    else:
        raise AssertionError("the console never settled: reads or keys still pending")
    # A dialog takes only keys pressed once it could be read (screens/dialog.py): settled
    # means that a key pressed next is an answer to it.
    deadline = time.monotonic() + 10
    while not _screen_ready(app):
        if time.monotonic() > deadline:
            raise AssertionError(f"{type(app.screen).__name__} never became ready for keys")
        await pilot.pause(0.02)


def _screen_ready(app: App) -> bool:
    try:
        return bool(getattr(app.screen, "ready", True))
    except ScreenStackError:
        return True


async def _wait_for(pilot: Pilot, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll `condition` while the console runs (live refresh included), up to `timeout` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)


@pytest.fixture
def console(make_console: MakeConsole) -> RunConsole:
    """`async with console() as (app, pilot):` a console on the demo queue, running (at 100x30
    unless `size` says otherwise) with its first reads shown; `options` go to the console."""

    @contextlib.asynccontextmanager
    async def run(
        size: tuple[int, int] = (100, 30), **options: object
    ) -> AsyncIterator[tuple[QueueConsole, Pilot]]:
        app = make_console(**options)
        async with app.run_test(size=size) as pilot:
            await _settle(pilot)
            yield app, pilot

    return run


@pytest.fixture
def settle() -> Callable[..., object]:
    """`await settle(pilot)`: background reads done and rendered."""
    return _settle


@pytest.fixture
def wait_for() -> Callable[..., object]:
    """`await wait_for(pilot, condition)`: the console keeps running until it holds."""
    return _wait_for
