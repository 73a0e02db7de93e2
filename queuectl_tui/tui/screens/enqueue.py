"""The enqueue form: the same fields and the same validator (`parse_job_spec`) as
`queuectl enqueue`, with each error shown beside its field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Static

from ...models import JobSpec, JobSpecError, parse_job_spec
from ...store import DuplicateJobError, EnqueueResult, StoreError
from ...timeutil import parse_duration, to_iso
from .forms import Field, FormScreen, number_or_text

FIELDS: tuple[tuple[str, str, str], ...] = (
    ("command", "Command", "shell command, run with /bin/sh -c (required)"),
    ("id", "Id", "blank: a random id"),
    ("priority", "Priority", "integer, higher runs first (0)"),
    ("run_at", "Run at", "ISO 8601 time or +30s, +5m, +2h (now)"),
    ("max_retries", "Max retries", "retries after the first run (config)"),
    ("timeout", "Timeout", "seconds (config job-timeout)"),
    ("queue", "Queue", "letters, digits, - _ . (default)"),
    ("idempotency_key", "Idem. key", "blank: none; a job with a known key is not added again"),
)


def form_to_object(values: dict[str, str], now: int) -> dict[str, Any]:
    """The JSON object `queuectl enqueue` would receive for these form values."""
    obj: dict[str, Any] = {}
    for name, text in values.items():
        if not text:
            continue
        if name in ("priority", "max_retries"):
            obj[name] = number_or_text(text, int)
        elif name == "timeout":
            obj[name] = number_or_text(text, float)
        elif name == "run_at":
            try:  # +30s, +5m, 2h: from now
                obj[name] = to_iso(now + parse_duration(text.strip().removeprefix("+")))
            except ValueError:
                obj[name] = text  # a time, or not: the validator says
        else:
            obj[name] = text
    return obj


class EnqueueScreen(FormScreen[EnqueueResult | None]):
    """Dismisses with what the enqueue did (the new job, or the one that holds the
    idempotency key), or None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Enqueue"),
    ]

    def __init__(
        self, enqueue: Callable[[JobSpec], EnqueueResult], clock: Callable[[], int]
    ) -> None:
        super().__init__()
        self.enqueue = enqueue
        self.clock = clock

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="form"):
            yield Static(Text("New job", style="bold"), id="dialog-title")
            for name, label, placeholder in FIELDS:
                yield Field(name, label, placeholder)
            yield Static("", id="form-status")
            with Horizontal(id="dialog-buttons"):
                yield Button("Enqueue", id="submit", variant="primary")
                yield Button("Cancel", id="cancel")
            yield Static(
                Text("Enter or Ctrl+S enqueues · Tab next field · Esc cancels", style="dim")
            )

    def on_mount(self) -> None:
        self.query_one("#input-command", Input).focus()

    def fields(self) -> dict[str, Field]:
        return {field.field_name: field for field in self.query(Field)}

    def action_submit(self) -> None:
        fields = self.fields()
        for field in fields.values():
            field.set_error(None)
        values = {name: field.value for name, field in fields.items()}
        try:
            spec = parse_job_spec(form_to_object(values, self.clock()))
        except JobSpecError as error:
            self.show_error(error.field, str(error))
            return
        self.query_one("#form-status", Static).update(Text("Enqueuing…", style="dim"))
        self.save(spec)

    def show_error(self, name: str | None, message: str) -> None:
        fields = self.fields()
        field = fields.get(name or "") or fields["command"]
        field.set_error(message)
        field.input.focus()
        self.query_one("#form-status", Static).update("")

    @work(thread=True, exclusive=True, group="enqueue")
    def save(self, spec: JobSpec) -> None:
        try:
            result = self.enqueue(spec)
        except DuplicateJobError as error:
            self.app.call_from_thread(self.show_error, "id", str(error))
        except StoreError as error:
            self.app.call_from_thread(self.show_error, None, str(error))
        else:
            self.app.call_from_thread(self.dismiss, result)
