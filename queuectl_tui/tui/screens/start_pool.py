"""The start-pool form: how many workers; the pool runs as its own background process.

Cancel has the focus when it opens, so an Enter meant for something else starts nothing."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from .forms import Field, FormScreen

MAX_WORKERS = 256


def parse_count(text: str) -> int:
    """A worker count from the form; ValueError says what is wrong."""
    try:
        count = int(text)
    except ValueError:
        raise ValueError("must be a whole number") from None
    if not 1 <= count <= MAX_WORKERS:
        raise ValueError(f"must be between 1 and {MAX_WORKERS}")
    return count


class StartPoolScreen(FormScreen[int | None]):
    """Dismisses with the worker count, or None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Start"),
    ]

    def __init__(self, default_count: int) -> None:
        super().__init__()
        self.default_count = default_count

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="form"):
            yield Static(Text("Start a worker pool", style="bold"), id="dialog-title")
            yield Static(
                Text(
                    "Runs `queuectl worker start` as a background process; it keeps running "
                    "after the console closes. Stop it with x (stop all pools).",
                    style="dim",
                )
            )
            yield Field("count", "Workers", "1-256", str(self.default_count))
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button("Start", id="submit", variant="error")
            yield Static(
                Text("shift+tab: the count · Tab: Start · ctrl+s starts · Esc cancels", style="dim")
            )

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def action_submit(self) -> None:
        field = self.query_one(Field)
        try:
            count = parse_count(field.value)
        except ValueError as error:
            field.set_error(f"workers {error}")
            return
        self.dismiss(count)
