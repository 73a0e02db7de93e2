"""The queue-limit form: at most how many of a queue's jobs run at once over every pool.

Cancel has the focus when it opens, so an Enter meant for something else changes nothing."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from ...display import printable
from ...models import MAX_QUEUE_LIMIT, queue_limit_text
from .forms import Field, FormScreen

NO_LIMIT = 0  # what the form gives back for "none"


def parse_limit(text: str) -> int:
    """A limit from the form (NO_LIMIT for 'none' or empty); ValueError says what is wrong."""
    wrong = ValueError(f"must be 1 to {MAX_QUEUE_LIMIT:,}, or none")
    try:
        limit = queue_limit_text(text or "none")
    except ValueError:
        raise wrong from None
    if limit is None:
        return NO_LIMIT
    if not 1 <= limit <= MAX_QUEUE_LIMIT:
        raise wrong
    return limit


class QueueLimitScreen(FormScreen[int]):
    """Dismisses with the new limit (NO_LIMIT lifts it), or None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Set"),
    ]

    def __init__(self, queue: str, current: int | None) -> None:
        super().__init__()
        self.queue = queue
        self.current = current

    def compose(self) -> ComposeResult:
        shown = printable(self.queue, single_line=True)
        now = "no limit" if self.current is None else f"at most {self.current}"
        with Vertical(id="dialog", classes="form"):
            yield Static(Text(f"Limit queue {shown}", style="bold"), id="dialog-title")
            yield Static(
                Text(
                    f"Now: {now}. At most this many of its jobs run at once, over every pool "
                    "on every host; 'none' lifts the limit. Running jobs are not stopped.",
                    style="dim",
                )
            )
            start = "none" if self.current is None else str(self.current)
            yield Field("limit", "Running", f"1-{MAX_QUEUE_LIMIT} or none", start)
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button("Set limit", id="submit", variant="error")
            yield Static(
                Text("shift+tab: the limit · Tab: Set · ctrl+s sets · Esc cancels", style="dim")
            )

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def action_submit(self) -> None:
        field = self.query_one(Field)
        try:
            limit = parse_limit(field.value)
        except ValueError as error:
            field.set_error(f"the limit {error}")
            return
        self.dismiss(limit)
