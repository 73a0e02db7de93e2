"""The summary bar, always on top: database, counts per state, workers, throughput, and
whether live updates are frozen, or the database cannot be read."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widget import Widget

from ... import presentation
from ...location import shown
from ...models import STATES, JobState
from .. import format as fmt


@dataclass(slots=True)
class SummaryData:
    database: str
    by_state: dict[JobState, int] = field(default_factory=dict)
    active_workers: int = 0
    completed_per_minute: list[int] = field(default_factory=list)
    failed_per_minute: list[int] = field(default_factory=list)
    exists: bool = True


WIDE = 90  # columns; narrower terminals get shorter sparklines
SPARK_MINUTES_NARROW = 10


class SummaryBar(Widget):
    """Three lines: where, how many, how fast."""

    def __init__(self, database: str, readonly: bool, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data = SummaryData(database)
        self.readonly = readonly
        self.paused = False
        self.lost = False  # the last read failed: what is shown is what was read before
        self.now = 0

    def show(self, data: SummaryData, now: int, paused: bool) -> None:
        self.data = data
        self.now = now
        self.paused = paused
        self.refresh()

    def render(self) -> Group:
        """Built at render time, so that the sparklines fit the width the bar has now."""
        data = self.data
        top = Table.grid(expand=True)
        top.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        top.add_column(justify="right", no_wrap=True)
        where = Text.assemble(
            ("queuectl ", "bold"), ("db ", "dim"), fmt.plain(shown(data.database))
        )
        if not data.exists:
            where.append("  no queue here yet", style="bold black on yellow")
            where.append(" (the first job enqueued creates it)", style="dim")
        mode = Text()
        if self.readonly:
            mode.append(" READ-ONLY ", style="bold black on yellow")
            mode.append(" ")
        if self.paused:
            mode.append(" FROZEN (f) ", style="bold white on dark_red")
        elif self.lost:
            mode.append(" DATABASE LOST ", style="bold white on red")
            mode.append(" counts as last read", style="dim")
        else:
            mode.append("● live", style="bold green")
        mode.append("  " + fmt.timestamp(self.now).replace(" UTC", "Z"), style="dim")
        top.add_row(where, mode)

        counts = Text(no_wrap=True, overflow="ellipsis")
        for state in STATES:
            n = data.by_state.get(state, 0)
            counts.append(state.value + " ", style="dim")
            counts.append(f"{n:,}", style=presentation.STATE_STYLES[state] if n else "dim")
            counts.append("  ")
        total = sum(data.by_state.values())
        counts.append("total ", style="dim")
        counts.append(f"{total:,}", style="bold")

        rates = Text(no_wrap=True, overflow="ellipsis")
        workers = data.active_workers
        rates.append("workers ", style="dim")
        rates.append(f"{workers}", style="bold cyan" if workers else "dim")
        rates.append(" active", style="dim")
        minutes = SPARK_MINUTES_NARROW if self.size.width < WIDE else len(data.completed_per_minute)
        completed = data.completed_per_minute[-minutes:]
        failed = data.failed_per_minute[-minutes:]
        rates.append("   done/min ", style="dim")
        rates.append(f"{completed[-1] if completed else 0:,} ", style="bold green")
        rates.append_text(fmt.sparkline(completed, "green"))
        rates.append("   failed/min ", style="dim")
        rates.append(f"{failed[-1] if failed else 0:,} ", style="bold red" if any(failed) else "")
        rates.append_text(fmt.sparkline(failed, "red"))
        return Group(top, counts, rates)
