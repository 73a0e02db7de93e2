"""KeyOrder on its own, in a bare Textual app: keys reach their handlers in the order they
were pressed, whatever the widgets do meanwhile; keys that act on rows wait for them."""

from __future__ import annotations

import asyncio
from typing import Any

from textual import events
from textual.app import App, ComposeResult
from textual.dom import DOMNode
from textual.widgets import Static

from queuectl_tui.tui.key_order import KeyOrder


class First(Static, can_focus=True):
    """Its key moves the focus on at once, then takes its time."""

    async def on_key(self, event: events.Key) -> None:
        if event.key == "a":
            event.stop()
            self.screen.set_focus(self.app.query_one(Second))
            await asyncio.sleep(0.3)
            self.app.seen.append("a")  # type: ignore[attr-defined]


class Second(Static, can_focus=True):
    def on_key(self, event: events.Key) -> None:
        event.stop()
        self.app.seen.append(event.key)  # type: ignore[attr-defined]


class Typing(App[None]):
    def __init__(self, dropped: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.dropped = dropped
        self.keys = KeyOrder(self, super().on_event, self._target, lambda key: key.key == "r")

    def _target(self, event: events.Key) -> DOMNode | None:
        return None if event.key in self.dropped else self.focused or self.screen

    async def on_event(self, event: events.Event) -> None:
        await self.keys.on_event(event)

    def compose(self) -> ComposeResult:
        yield First("first")
        yield Second("second")


async def _until(pilot: Any, condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError("the condition never held")


async def test_a_key_waits_for_the_one_before_it_even_when_the_focus_moved_on() -> None:
    app = Typing()
    async with app.run_test() as pilot:
        app.screen.set_focus(app.query_one(First))
        await pilot.press("a", "b")  # "b" goes to Second, focused while "a" still runs
        await _until(pilot, lambda: len(app.seen) == 2)
        assert app.seen == ["a", "b"]
        await _until(pilot, lambda: not app.keys.pending)  # "b" followed to the end too


async def test_keys_that_act_on_rows_wait_for_them_and_keep_their_order() -> None:
    app = Typing()
    async with app.run_test() as pilot:
        app.screen.set_focus(app.query_one(Second))
        app.keys.hold_row_keys()
        await pilot.press("r", "x")  # "x" acts on no rows, but comes after "r"
        await pilot.pause(0.1)
        assert app.seen == [] and app.keys.pending and app.keys.rows_due
        app.keys.rows_in()
        await _until(pilot, lambda: len(app.seen) == 2)
        assert app.seen == ["r", "x"]


async def test_a_key_with_nowhere_to_go_is_dropped_and_the_next_goes_on() -> None:
    app = Typing(dropped=frozenset({"q"}))
    async with app.run_test() as pilot:
        app.screen.set_focus(app.query_one(Second))
        await pilot.press("q", "x")
        await _until(pilot, lambda: app.seen)
        assert app.seen == ["x"]
