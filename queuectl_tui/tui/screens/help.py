"""The key map, built from the same bindings the footer shows."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

Section = tuple[str, Sequence[tuple[str, str]]]


def key_table(sections: Sequence[Section]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True, min_width=12)
    table.add_column()
    for index, (title, keys) in enumerate(sections):
        if index:
            table.add_row("", "")
        table.add_row(Text(title, style="bold underline"), "")
        for key, description in keys:
            table.add_row(Text(key), Text(description))
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,question_mark,q", "close", "Close"),
    ]

    def __init__(self, sections: Sequence[Section], readonly: bool) -> None:
        super().__init__()
        self.sections = sections
        self.readonly = readonly

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="help"):
            title = "Keys" + (
                " (read-only: actions that change the queue are hidden)" if self.readonly else ""
            )
            yield Static(Text(title, style="bold"), id="dialog-title")
            with VerticalScroll(id="help-scroll"):
                yield Static(key_table(self.sections))
            yield Static(Text("Esc, ? or q closes · ctrl+p finds any action by name", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
