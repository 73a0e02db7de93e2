"""Fixed-width columns, columns that fit what they show (ids), and one flexible column that
takes the rest of the width, so that a table fits 80 columns and uses a wide terminal well: at
160 columns ids are whole. Cells are cut to their column here, with a one-space gap, because
the tables draw without cell padding."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
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
    width: int  # cells including the gap (a fitted column's least); 0 for the flexible column
    right: bool = False
    fit: int = 0  # above 0: as wide as its widest cell, up to this, room allowing


def layout(specs: Sequence[ColumnSpec], width: int, widest: dict[str, int]) -> dict[str, int]:
    """Each column's width for a table `width` cells wide whose fitted columns' widest cells
    are `widest`: the flexible column keeps MIN_FLEX_WIDTH, every fitted column its least,
    and the room left goes to the fitted columns in their order, each up to its widest cell:
    the first (the id) is whole before the next (a worker id) grows."""
    room = width - SCROLLBAR
    fixed = sum(spec.width for spec in specs if not spec.fit)
    spare = room - fixed - MIN_FLEX_WIDTH - sum(spec.width for spec in specs if spec.fit)
    widths: dict[str, int] = {}
    for spec in specs:
        if not spec.fit:
            widths[spec.key] = spec.width
            continue
        wanted = max(spec.width, min(spec.fit, widest.get(spec.key, 0) + 1))
        grown = min(wanted - spec.width, max(0, spare))
        widths[spec.key] = spec.width + grown
        spare -= grown
    flex = max(MIN_FLEX_WIDTH, room - sum(widths.values()))
    return {key: value or flex for key, value in widths.items()}


MARK = ColumnSpec("mark", "", 2)  # ● on a marked row


def mark_cell(marked: bool) -> Text:
    return Text("●", style="bold cyan") if marked else Text("")


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

    def __init__(self, *, id: str | None = None, marks: Collection[str] = ()) -> None:
        super().__init__(id=id)
        self.marks = marks  # the keys of marked rows (the console's own, kept up to date)
        self.cell_padding = 0
        self._widths: dict[str, int] = {}
        self._items: list[T] = []
        self._built: list[tuple[str, Sequence[Text]]] = []  # the items' rows, uncut
        self._fitted_rows: list[Row] = []  # and cut to their columns
        self._times: list[object] = []  # what of each row depends on the time (time_key)
        self._by_key: dict[str, T] = {}
        self._now = 0

    def on_mount(self) -> None:
        self._lay_out(self.size.width or 80)

    def _lay_out(self, width: int) -> bool:
        """Give the columns the widths the table's width and cells call for; True if they
        changed (the rows are then drawn again)."""
        widest: dict[str, int] = {}
        for index, spec in enumerate(self.COLUMNS):
            if spec.fit:
                cells = (cells[index] for _, cells in self._built if index < len(cells))
                widest[spec.key] = max((cell.cell_len for cell in cells), default=0)
        widths = layout(self.COLUMNS, width, widest)
        if widths == self._widths:
            return False
        selected = self.selected_key if self._widths else None
        if self._widths:
            self.reset()
            self.clear(columns=True)
        self._widths = widths
        for spec in self.COLUMNS:
            self.add_column(spec.label, width=widths[spec.key], key=spec.key)
        if selected is not None:
            self.sync([self._fitted(row) for row in self._built])
            self.select_key(selected)
        return True

    def on_resize(self, event: events.Resize) -> None:
        self._lay_out(event.size.width)

    def time_key(self, item: T, now: int) -> object:
        """What of an item's row depends on the time (`retime` builds a row again only when
        it changed): by default the time itself, every row each time."""
        return now

    def show(self, items: Sequence[T], now: int) -> None:
        """Show these items (already in display order) as of `now`."""
        self._items = list(items)
        self._now = now
        self._built = [self.build(item, now) for item in self._items]
        self._times = [self.time_key(item, now) for item in self._items]
        self._by_key = {key: item for (key, _), item in zip(self._built, self._items, strict=False)}
        self._lay_out(self.size.width or 80)
        self._fitted_rows = [self._fitted(row) for row in self._built]
        self.sync(self._fitted_rows)

    def retime(self, now: int) -> None:
        """The same items as of `now` (the console's tick): a row is built and cut again only
        where what depends on the time changed, so a screen of old jobs costs nothing."""
        changed = []
        for index, item in enumerate(self._items):
            moment = self.time_key(item, now)
            if moment != self._times[index]:
                self._times[index] = moment
                self._built[index] = self.build(item, now)
                changed.append(index)
        self._now = now
        if not changed:
            return
        if self._lay_out(self.size.width or 80):
            self._fitted_rows = [self._fitted(row) for row in self._built]
        else:
            for index in changed:
                self._fitted_rows[index] = self._fitted(self._built[index])
        self.sync(self._fitted_rows)

    def _fitted(self, row: tuple[str, Sequence[Text]]) -> Row:
        key, cells = row
        fitted = [
            fit(cell, self._widths[spec.key], spec.right)
            for cell, spec in zip(cells, self.COLUMNS, strict=False)
        ]
        return key, fitted

    def blank(self) -> None:
        """No rows and no items until the next `show` (the view is being read)."""
        self.reset()
        self._items = []
        self._built = []
        self._fitted_rows = []
        self._times = []
        self._by_key = {}

    @property
    def items(self) -> list[T]:
        return self._items

    def selected_item(self) -> T | None:
        key = self.selected_key
        return None if key is None else self._by_key.get(key)
