"""A yes/no question for destructive and bulk actions; the safe answer has the focus.

A question whose count is still being read opens at once, saying so, and can be answered yes
only once the count is shown."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from .dialog import Dialog


class ConfirmScreen(Dialog[bool]):
    """Dismisses with True only when the operator chooses the action explicitly."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("n", "cancel", "No", show=False),
        Binding("y", "confirm", "Yes", show=False),
        Binding("left,right", "switch", "Switch", show=False),
    ]

    def __init__(
        self,
        title: str,
        message: Text | str,
        confirm_label: str,
        pending: bool = False,
        back_label: str = "Cancel",
    ) -> None:
        super().__init__()
        self.back_label = back_label  # the safe choice (another word where "cancel" is the act)
        self.title_text = title
        self.message = message if isinstance(message, Text) else Text(message)
        self.confirm_label = confirm_label
        self.pending = pending  # the question is not complete yet: only "no" is possible

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="confirm"):
            yield Static(Text(self.title_text, style="bold"), id="dialog-title")
            yield Static(self.message, id="dialog-message")
            with Horizontal(id="dialog-buttons"):
                yield Button(self.back_label, id="cancel", variant="primary")
                yield Button(
                    self.confirm_label, id="confirm", variant="error", disabled=self.pending
                )
            yield Static(Text("Enter chooses the focused button · y yes · n/Esc no", style="dim"))

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def ask(self, title: str, message: Text, confirm_label: str) -> None:
        """Complete a pending question; it takes keys once the operator could read it."""
        self.title_text, self.message, self.confirm_label = title, message, confirm_label
        self.query_one("#dialog-title", Static).update(Text(title, style="bold"))
        self.query_one("#dialog-message", Static).update(message)
        confirm = self.query_one("#confirm", Button)
        confirm.label = confirm_label
        confirm.disabled = self.pending = False
        self._shown_at = None
        self.call_after_refresh(self.mark_shown)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm")

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_confirm(self) -> None:
        if not self.pending:
            self.dismiss(True)

    def action_switch(self) -> None:
        target = "#confirm" if self.focused and self.focused.id == "cancel" else "#cancel"
        self.query_one(target, Button).focus()
