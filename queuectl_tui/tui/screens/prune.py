"""The prune form: which finished jobs to remove (their states) and how old.

Cancel has the focus when it opens; the console then counts what would go and asks again
with that count before anything is removed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from ...models import FINISHED_STATES, JobState
from ...timeutil import parse_duration
from .forms import Field, FormScreen


@dataclass(frozen=True, slots=True)
class PruneChoice:
    states: tuple[JobState, ...]
    older_than: str  # as typed, for the messages
    older_than_ms: int
    before: int  # the cutoff (epoch ms), fixed when the form was filled in: count = prune


def parse_states(text: str) -> tuple[JobState, ...]:
    names = [part.strip().lower() for part in text.replace(",", " ").split() if part.strip()]
    allowed = {state.value: state for state in FINISHED_STATES}
    if not names or any(name not in allowed for name in names):
        raise ValueError(f"must be some of: {', '.join(allowed)}")
    return tuple(dict.fromkeys(allowed[name] for name in names))


class PruneScreen(FormScreen[PruneChoice]):
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Count"),
    ]

    def __init__(self, clock: Callable[[], int]) -> None:
        super().__init__()
        self.clock = clock  # the console's (the store's): finish times are on it

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="form"):
            yield Static(Text("Prune finished jobs", style="bold"), id="dialog-title")
            yield Static(
                Text(
                    "Removes finished jobs, with their attempts and output, that ended longer "
                    "ago than the age given. The count is shown before anything is removed.",
                    style="dim",
                )
            )
            yield Field("states", "States", "completed, cancelled, dead", "completed")
            yield Field("age", "Older than", "90s, 30m, 12h, 7d, 2w", "7d")
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button("Count them", id="submit", variant="error")
            yield Static(Text("shift+tab: the fields · ctrl+s counts · Esc cancels", style="dim"))

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def action_submit(self) -> None:
        states_field, age_field = self.query(Field)
        ok = True
        try:
            states = parse_states(states_field.value)
        except ValueError as error:
            states_field.set_error(f"states {error}")
            ok = False
        try:
            age = parse_duration(age_field.value)
        except ValueError as error:
            age_field.set_error(str(error))
            ok = False
        if ok:
            self.dismiss(PruneChoice(states, age_field.value.strip(), age, self.clock() - age))
