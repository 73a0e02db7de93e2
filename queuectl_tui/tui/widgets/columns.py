"""Fixed-width columns with one flexible column that takes the rest of the width, so that a
table fits 80 columns and uses a wide terminal well. Cells are cut to their column here, with
a one-space gap, because the tables draw without cell padding."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from rich.text import Text
from textual import events

from .keyed_table import KeyedTable, Row

T = TypeVar("T")

MIN_FLEX_WIDTH = 12
SCROLLBAR = 1


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    key: str
    label: str
    width: int  # cells including the gap; 0 for the flexible column
    right: bool = False


def fit(cell: Text, width: int, right: bool = False) -> Text:
    """A cell cut to `width - 1` cells and, when right-aligned, followed by the gap."""
    room = max(1, width - 1)
    text = cell.copy()
    text.no_wrap = True
    if text.cell_len > room:
        text.truncate(room, overflow="ellipsis")
    if right:
        text.justify = None
        text.pad_left(room - text.cell_len)
        text.append(" ")
    return text


class ColumnTable(KeyedTable, Generic[T]):
    """A keyed table whose rows are built from items of type T by `build`."""

    COLUMNS: Sequence[ColumnSpec] = ()
    # Subclasses define build(item, now) -> (row key, cells in COLUMNS order).
    build: Callable[[T, int], tuple[str, Sequence[Text]]]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cell_padding = 0
        self._flex_width = 0
        self._items: list[T] = []
        self._by_key: dict[str, T] = {}
        self._now = 0

    def on_mount(self) -> None:
        self._build_columns(self._flex_for(self.size.width or 80))

    def _flex_for(self, width: int) -> int:
        fixed = sum(spec.width for spec in self.COLUMNS)
        return max(MIN_FLEX_WIDTH, width - fixed - SCROLLBAR)

    def _build_columns(self, flex: int) -> None:
        self._flex_width = flex
        for spec in self.COLUMNS:
            self.add_column(spec.label, width=spec.width or flex, key=spec.key)

    def on_resize(self, event: events.Resize) -> None:
        flex = self._flex_for(event.size.width)
        if flex == self._flex_width:
            return
        selected = self.selected_key
        self.reset()
        self.clear(columns=True)
        self._build_columns(flex)
        self.show(self._items, self._now)
        if selected is not None:
            self.select_key(selected)

    def show(self, items: Sequence[T], now: int) -> None:
        """Show these items (already in display order) as of `now`."""
        self._items = list(items)
        self._now = now
        rows = [self._row(item, now) for item in self._items]
        self._by_key = {key: item for (key, _), item in zip(rows, self._items, strict=False)}
        self.sync(rows)

    def _row(self, item: T, now: int) -> Row:
        key, cells = self.build(item, now)
        fitted = [
            fit(cell, spec.width or self._flex_width, spec.right)
            for cell, spec in zip(cells, self.COLUMNS, strict=False)
        ]
        return key, fitted

    def blank(self) -> None:
        """No rows and no items until the next `show` (the view is being read)."""
        self.reset()
        self._items = []
        self._by_key = {}

    @property
    def items(self) -> list[T]:
        return self._items

    def selected_item(self) -> T | None:
        key = self.selected_key
        return None if key is None else self._by_key.get(key)
