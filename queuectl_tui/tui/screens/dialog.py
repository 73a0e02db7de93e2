"""A modal dialog answers only keys pressed after the operator could read it.

Keys reach the console in bursts (a paste, a fast typist, text meant for another widget): a key
pressed before the dialog was on screen, or so soon after that no one could have read it, is
not an answer to it, so a stray Enter or `y` never confirms anything."""

from __future__ import annotations

from time import monotonic
from typing import TypeVar

from textual import events
from textual.screen import ModalScreen

ResultT = TypeVar("ResultT")

READING_TIME = 0.2  # seconds; faster than anyone reads a question and answers it


class Dialog(ModalScreen[ResultT]):
    _shown_at: float | None = None

    def on_mount(self) -> None:
        self.call_after_refresh(self.mark_shown)

    def mark_shown(self) -> None:
        """The dialog, or what it asks, is on screen as of now."""
        self._shown_at = monotonic()

    @property
    def ready(self) -> bool:
        """Whether a key pressed now would be taken."""
        return self._shown_at is not None and monotonic() >= self._shown_at + READING_TIME

    def takes(self, key: events.Key) -> bool:
        """False for a key pressed before this dialog could be read (Key.time is monotonic)."""
        return self._shown_at is not None and key.time >= self._shown_at + READING_TIME
