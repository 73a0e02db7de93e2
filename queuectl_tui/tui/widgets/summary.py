"""The summary bar, always on top: database, counts per state, workers, throughput, and
whether live updates are frozen, or the database cannot be read."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from ... import presentation
from ...location import shown
from ...models import JobState
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


class SummaryBar(Vertical):
    """Three lines: where, how many, how fast. Each is a line of its own, drawn again only
    when what it shows changed: the clock moves each second, and redrawing the whole bar that
    often was a good part of an idle console's CPU."""

    DEFAULT_CSS = """
    SummaryBar > Horizontal { height: 1; }
    SummaryBar Static { height: 1; }
    #summary-where { width: 1fr; }
    #summary-mode { width: 25; }
    """

    def __init__(self, database: str, readonly: bool, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data = SummaryData(database)
        self.readonly = readonly
        self.paused = False
        self.lost = False  # the last read failed: what is shown is what was read before
        self.now = 0
        self._shown: dict[str, Text] = {}

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Static(id="summary-where")
            yield Static(id="summary-mode")
        yield Static(id="summary-counts")
        yield Static(id="summary-rates")

    def on_mount(self) -> None:
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def show(self, data: SummaryData, now: int, paused: bool) -> None:
        only_the_clock = data is self.data and paused == self.paused
        self.data = data
        self.now = now
        self.paused = paused
        if only_the_clock:  # the console's tick
            self._draw({"mode": self._mode()})
        else:
            self.redraw()

    def redraw(self) -> None:
        """Update each line whose text changed (the lines are built for the width now)."""
        self._draw(self.lines())

    def _draw(self, lines: dict[str, Text]) -> None:
        if not self.is_mounted:
            return
        for name, text in lines.items():
            before = self._shown.get(name)
            if before is not None and _same(before, text):
                continue
            self._shown[name] = text
            line = self.query_one(f"#summary-{name}", Static)
            if name == "mode" and (before is None or before.cell_len != text.cell_len):
                line.styles.width = text.cell_len  # a fixed width: no layout at each tick
            line.update(text, layout=False)

    def plain_text(self) -> str:
        """What the bar shows, as plain text (for tests and screen readers)."""
        lines = self.lines()
        return "\n".join(
            (
                lines["where"].plain + "  " + lines["mode"].plain,
                lines["counts"].plain,
                lines["rates"].plain,
            )
        )

    def lines(self) -> dict[str, Text]:
        """The four parts: where and mode (the first line), counts, rates."""
        data = self.data
        where = Text.assemble(
            ("queuectl ", "bold"), ("db ", "dim"), fmt.plain(shown(data.database))
        )
        where.no_wrap = True
        where.overflow = "ellipsis"
        if not data.exists:
            where.append("  no queue here yet", style="bold black on yellow")
            where.append(" (the first job enqueued creates it)", style="dim")
        return {"where": where, "mode": self._mode(), **self._figures()}

    def _mode(self) -> Text:
        """Read-only, frozen, lost or live, and the clock."""
        mode = Text(no_wrap=True)
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
        # To the minute: a clock that moves each second redraws the screen each second (the
        # dot says the console is live; ages and heartbeats tick on their own rows).
        mode.append("  " + fmt.timestamp(self.now)[:-7] + "Z", style="dim")
        return mode

    def _figures(self) -> dict[str, Text]:
        """Jobs per state, and workers and rates."""
        data = self.data

        # Narrow, states with no jobs and the total (the tabs below count nothing then) give
        # way, so that the rest fits in 80 columns.
        narrow = (self.size.width or WIDE) < WIDE
        gap = " " if narrow else "  "
        counts = Text(no_wrap=True, overflow="ellipsis")
        for state in presentation.STATE_ORDER:
            n = data.by_state.get(state, 0)
            if narrow and not n:
                continue
            counts.append(state.value + " ", style="dim")
            counts.append(f"{n:,}", style=presentation.STATE_STYLES[state] if n else "dim")
            counts.append(gap)
        total = sum(data.by_state.values())
        if not narrow or not total:
            counts.append("total ", style="dim")
            counts.append(f"{total:,}", style="bold")

        rates = Text(no_wrap=True, overflow="ellipsis")
        workers = data.active_workers
        rates.append("workers ", style="dim")
        rates.append(f"{workers}", style="bold cyan" if workers else "dim")
        rates.append(" active", style="dim")
        minutes = (
            SPARK_MINUTES_NARROW
            if (self.size.width or WIDE) < WIDE
            else len(data.completed_per_minute)
        )
        completed = data.completed_per_minute[-minutes:]
        failed = data.failed_per_minute[-minutes:]
        rates.append("   done/min ", style="dim")
        rates.append(f"{completed[-1] if completed else 0:,} ", style="bold green")
        rates.append_text(fmt.sparkline(completed, "green"))
        rates.append("   failed/min ", style="dim")
        rates.append(f"{failed[-1] if failed else 0:,} ", style="bold red" if any(failed) else "")
        rates.append_text(fmt.sparkline(failed, "red"))
        return {"counts": counts, "rates": rates}


def _same(a: Text, b: Text) -> bool:
    return a.plain == b.plain and a.spans == b.spans and a.style == b.style
