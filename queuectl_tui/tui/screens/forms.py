"""Pieces the forms share: a labelled input with its error beside it, and text-to-JSON
conversion that leaves wrong input for the one validator to name."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Input, Label, Static

from .dialog import Dialog

ResultT = TypeVar("ResultT")


class FormScreen(Dialog[ResultT | None]):
    """A modal form: Enter in any input or the `submit` button submits, any other button and
    Esc cancel (dismissing with None)."""

    action_submit: Callable[[], None]  # each form validates and acts in its own way

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "submit":
            self.action_submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class Field(Horizontal):
    """Label, input, and the error for this input, on one row."""

    def __init__(
        self,
        name: str,
        label: str,
        placeholder: str = "",
        value: str = "",
    ) -> None:
        super().__init__(classes="field", id=f"field-{name}")
        self.field_name = name
        self.label = label
        self.placeholder = placeholder
        self.initial = value

    def compose(self) -> ComposeResult:
        yield Label(self.label, classes="field-label")
        yield Input(
            value=self.initial,
            placeholder=self.placeholder,
            id=f"input-{self.field_name}",
            compact=True,
            select_on_focus=False,
        )
        yield Static("", classes="field-error", id=f"error-{self.field_name}")

    @property
    def input(self) -> Input:
        return self.query_one(Input)

    @property
    def value(self) -> str:
        return self.input.value.strip()

    def set_error(self, message: str | None) -> None:
        error = self.query_one(".field-error", Static)
        error.update(Text(message or "", style="bold red"))
        self.set_class(bool(message), "-invalid")


def number_or_text(text: str, kind: type) -> object:
    """`text` as an int (or float), or the text itself when it is not one, so that the shared
    validator rejects it with its own message naming the field."""
    try:
        return int(text)
    except ValueError:
        pass
    if kind is float:
        try:
            return float(text)
        except ValueError:
            pass
    return text
