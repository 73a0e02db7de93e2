"""Columns take the width there is: the id whole first, then the worker id, the command the
rest (never under its least)."""

from __future__ import annotations

from queuectl_tui.tui.widgets.columns import MIN_FLEX_WIDTH, layout
from queuectl_tui.tui.widgets.jobs_table import JobsTable


def test_a_long_id_is_whole_before_the_worker_grows() -> None:
    widths = layout(JobsTable.COLUMNS, 160, {"id": 90, "worker": 33})
    assert widths["id"] == 91  # the id and its gap
    assert widths["command"] == MIN_FLEX_WIDTH
    assert sum(widths.values()) == 159  # and the scrollbar


def test_with_room_every_fitted_column_is_whole_and_the_command_takes_the_rest() -> None:
    widths = layout(JobsTable.COLUMNS, 160, {"id": 36, "worker": 20})
    assert (widths["id"], widths["worker"]) == (37, 21)
    assert widths["command"] == 159 - sum(w for k, w in widths.items() if k != "command")
