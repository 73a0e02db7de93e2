"""A DataTable that is updated in place by row key: only changed cells are rewritten, and the
selected row stays selected (and on screen where it was) while rows come and go around it."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist

Row = tuple[str, Sequence[Text]]


def _same(a: Text, b: Text) -> bool:
    return (
        a.plain == b.plain and a.style == b.style and a.spans == b.spans and a.justify == b.justify
    )


class KeyedTable(DataTable[Text]):
    """Rows keyed by a stable id (a job or worker id)."""

    class PageEdge(Message):
        """The cursor was pushed past the first (-1) or last (+1) row of the page."""

        def __init__(self, table: KeyedTable, direction: int) -> None:
            super().__init__()
            self.table = table
            self.direction = direction

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, cell_padding=1)
        self._cells: dict[str, list[Text]] = {}
        self._order: list[str] = []

    @property
    def selected_key(self) -> str | None:
        if not self._order or not 0 <= self.cursor_row < len(self._order):
            return None
        return self._order[self.cursor_row]

    @property
    def keys(self) -> list[str]:
        return list(self._order)

    def cells_of(self, key: str) -> list[Text] | None:
        return self._cells.get(key)

    def sync(self, rows: Sequence[Row]) -> None:
        """Make the table show exactly `rows`, in order, touching only what changed."""
        selected = self.selected_key
        old_cursor = self.cursor_row
        wanted = [key for key, _ in rows]
        wanted_set = set(wanted)
        for key in [k for k in self._order if k not in wanted_set]:
            with contextlib.suppress(RowDoesNotExist):
                self.remove_row(key)
            del self._cells[key]
        column_keys = list(self.columns)
        for key, cells in rows:
            current = self._cells.get(key)
            if current is None:
                self.add_row(*cells, key=key)
                self._cells[key] = list(cells)
                continue
            for index, (before, after) in enumerate(zip(current, cells, strict=False)):
                if not _same(before, after):
                    self.update_cell(key, column_keys[index], after)
                    current[index] = after
        order_now = [k for k in self._order if k in wanted_set]
        kept = set(order_now)
        order_now += [k for k in wanted if k not in kept]
        if order_now != wanted:
            rank = {id(self._cells[key][0]): index for index, key in enumerate(wanted)}
            self.sort(key=lambda values: rank[id(values[0])])
        self._order = wanted
        self._keep_selection(selected, old_cursor)

    def _keep_selection(self, selected: str | None, old_cursor: int) -> None:
        if selected is None or selected not in self._cells:
            return
        index = self._order.index(selected)
        if index == old_cursor:
            return
        at_top = self.scroll_y == 0
        self.move_cursor(row=index, animate=False, scroll=at_top)
        if not at_top:
            self.scroll_to(y=self.scroll_y + index - old_cursor, animate=False, immediate=True)

    def reset(self) -> None:
        """Forget every row (a different pane, state or page)."""
        self.clear()
        self._cells.clear()
        self._order = []

    def select_first(self) -> None:
        if self._order:
            self.move_cursor(row=0, animate=False)
            self.scroll_to(y=0, animate=False)

    def select_last(self) -> None:
        if self._order:
            self.move_cursor(row=len(self._order) - 1, animate=False)

    def select_key(self, key: str) -> None:
        if key in self._cells:
            self.move_cursor(row=self._order.index(key), animate=False)

    # -- paging at the edges ------------------------------------------------------------------
    def _at_edge(self, direction: int) -> bool:
        """At the last row going down (or the first going up): ask for the next page."""
        if not self._order:
            return False
        edge = self.cursor_row >= len(self._order) - 1 if direction > 0 else self.cursor_row == 0
        if edge:
            self.post_message(self.PageEdge(self, direction))
        return edge

    def action_cursor_down(self) -> None:
        if not self._at_edge(+1):
            super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if not self._at_edge(-1):
            super().action_cursor_up()

    def action_page_down(self) -> None:
        if not self._at_edge(+1):
            super().action_page_down()

    def action_page_up(self) -> None:
        if not self._at_edge(-1):
            super().action_page_up()
