"""A run's output as it arrives: whole lines (a line still being printed waits for its end),
stderr in red, each made printable; it follows the end until the reader scrolls away."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import RichLog

from ...display import printable
from ...models import OutputChunk, Stream

MAX_LINES = 20_000  # the tail, as the pool keeps it


class OutputLog(RichLog):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id, wrap=True, markup=False, highlight=False, max_lines=MAX_LINES, auto_scroll=False
        )
        self.following = True
        self.lines_written = 0
        self._partial: dict[Stream, str] = {}

    def reset(self) -> None:
        self.clear()
        self._partial = {}
        self.following = True
        self.lines_written = 0

    def add(self, chunks: Sequence[OutputChunk], skipped: int = 0) -> None:
        """Append pieces; a line split between pieces is shown once it is whole."""
        if skipped:
            self._note(f"[{skipped:,} bytes of output not kept (output-limit)]")
        for chunk in chunks:
            text = self._partial.pop(chunk.stream, "") + chunk.text
            whole, newline, rest = text.rpartition("\n")
            if newline:
                self._line(chunk.stream, whole)
            if rest:
                self._partial[chunk.stream] = rest

    def end(self, empty_note: str = "(no output)") -> None:
        """The run is over: what is left of an unfinished line is shown."""
        for stream, rest in list(self._partial.items()):
            self._line(stream, rest)
        self._partial = {}
        if not self.lines_written:
            self._note(empty_note)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        # Writes only ever move the view down, to the end (and later: RichLog scrolls after
        # the next refresh, so where the view is says nothing of the reader while a backlog
        # is written). A move up is the reader's (keys, wheel, scrollbar): stay there.
        super().watch_scroll_y(old_value, new_value)
        if new_value < old_value:
            self.following = False

    def follow(self) -> None:
        self.following = True
        self.scroll_end(animate=False)

    def top(self) -> None:
        self.following = False
        self.scroll_home(animate=False)
        # Once more after the writes' own scrolls to the end, queued before it, have run.
        self.call_after_refresh(self.scroll_home, animate=False)

    def _line(self, stream: Stream, text: str) -> None:
        style = "red" if stream is Stream.STDERR else ""
        self.write(Text(printable(text), style=style), scroll_end=self.following)
        self.lines_written += text.count("\n") + 1

    def _note(self, text: str) -> None:
        self.write(Text(text, style="dim"), scroll_end=self.following)
