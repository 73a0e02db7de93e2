"""The output pane follows a run's end however much arrives at once, stays where the reader
scrolled to, and Home and End are obeyed even with writes still on their way."""

from __future__ import annotations

from textual.app import App, ComposeResult

from queuectl_tui.models import OutputChunk, Stream
from queuectl_tui.tui.widgets.output_log import OutputLog


class LogApp(App[None]):
    def compose(self) -> ComposeResult:
        yield OutputLog(id="output")


def lines(first: int, count: int) -> list[OutputChunk]:
    return [OutputChunk(n, Stream.STDOUT, f"line {n}\n", 0, 0) for n in range(first, first + count)]


async def test_a_backlog_written_at_once_is_followed_to_its_end() -> None:
    app = LogApp()
    async with app.run_test(size=(80, 20)) as pilot:
        log = app.query_one(OutputLog)
        for start in range(0, 600, 10):  # as the detail reads a long backlog, step by step
            log.add(lines(start, 10))
        await pilot.pause()
        await pilot.pause()
        assert log.following
        assert log.is_vertical_scroll_end
        assert log.lines_written == 600


async def test_home_stays_at_the_top_and_end_follows_again() -> None:
    app = LogApp()
    async with app.run_test(size=(80, 20)) as pilot:
        log = app.query_one(OutputLog)
        log.add(lines(0, 300))
        log.top()  # before the writes' own scrolls to the end have run
        await pilot.pause()
        log.add(lines(300, 50))
        await pilot.pause()
        await pilot.pause()
        assert not log.following and log.scroll_y == 0
        log.follow()
        log.add(lines(350, 50))
        await pilot.pause()
        await pilot.pause()
        assert log.following and log.is_vertical_scroll_end


async def test_scrolling_up_pauses_the_following() -> None:
    app = LogApp()
    async with app.run_test(size=(80, 20)) as pilot:
        log = app.query_one(OutputLog)
        log.add(lines(0, 200))
        await pilot.pause()
        log.focus()
        await pilot.press("pageup")
        await pilot.pause()
        log.add(lines(200, 20))
        await pilot.pause()
        assert not log.following and not log.is_vertical_scroll_end
