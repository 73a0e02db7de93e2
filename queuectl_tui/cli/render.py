"""Rich rendering for humans. Every untrusted string goes in as rich.text.Text, never markup."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderResult
from rich.table import Table
from rich.text import Text

from .. import presentation
from ..display import last_line, printable
from ..error_groups import ErrorGroup
from ..models import (
    Attempt,
    AuditEntry,
    Job,
    JobLink,
    JobLinks,
    JobState,
    QueueCounts,
    QueueInfo,
    Worker,
)
from ..presentation import STATE_STYLES
from ..store import QueueStats
from ..timeutil import human_age, to_iso_seconds

# Used when stdout is not a terminal and COLUMNS names no usable width.
PIPE_WIDTH = 200
MAX_WIDTH = 10_000


def _columns_setting() -> int | None:
    """COLUMNS as a width, or None when it is unset, empty, not a number, zero or absurd."""
    text = os.environ.get("COLUMNS", "").strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 6):
        return None
    width = int(text)
    return width if 0 < width <= MAX_WIDTH else None


def _terminal_width() -> int:
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns or 80
    except (OSError, ValueError):
        return 80


def console() -> Console:
    # rich honours NO_COLOR itself; a pipe gets plain text at a generous width. A COLUMNS
    # that is empty, zero or not a number is ignored: given to rich, it prints nothing.
    width = _columns_setting()
    if width is None:
        width = _terminal_width() if sys.stdout.isatty() else PIPE_WIDTH
    # rich reads COLUMNS and LINES again on its own, and fails on some values ("²").
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return Console(highlight=False, width=width, _environ=environ)


def plain(value: object) -> Text:
    return Text(printable(str(value), single_line=True) if value is not None else "")


def state_text(state: JobState) -> Text:
    return Text(state.value, style=STATE_STYLES.get(state, ""))


def _when(ms: int | None) -> str:
    return to_iso_seconds(ms)


def next_run(job: Job, now: int) -> str:
    return presentation.next_run(job, now)[0]


class Role(Enum):
    KEEP = "keep"  # never narrower than its content
    ID = "id"  # like KEEP, but folds onto more lines when no row could hold it
    FLEX = "flex"  # takes the width that is left, cut with an ellipsis
    OPTIONAL = "optional"  # shown only when there is room, in the order of `rank`


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    role: Role = Role.KEEP
    justify: JustifyMethod = "left"
    rank: int = 0
    # In plain output, what joins the words of a cell, so that it stays one field for awk:
    # "T" for an instant (2026-07-24T10:00:00), "_" for a label; " " keeps the text as it is.
    joiner: str = " "


FLEX_MIN = 5  # a flexible column is cut down to this before an id folds
FLEX_COMFORT = 30  # optional columns appear only while flexible columns keep this much
FOLDED_ID_FLOOR = 8  # an id column folds to no narrower than this; flexible columns go first


class FittedTable:
    """A table laid out for the width it is printed at.

    Ids, states and numbers keep the width of their content; the flexible columns (a
    command, an error) take what is left and are cut with an ellipsis; optional columns
    appear only when the flexible ones stay comfortably wide. When a bordered table cannot
    hold that, the borders go first, then the flexible columns; only an id longer than any
    row could give it folds onto more lines, and it is never cut."""

    def __init__(
        self,
        columns: Sequence[Column],
        rows: Sequence[Sequence[Text | str]],
        title: str | None = None,
    ) -> None:
        self.columns = list(columns)
        self.title = title
        self.rows = [[_as_text(cell) for cell in row] for row in rows]
        self.natural = [
            max([cell_len(column.header)] + [row[index].cell_len for row in self.rows])
            for index, column in enumerate(self.columns)
        ]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)

    def plain_lines(self) -> list[str]:
        """One header line, then a line per row: every column whole, aligned with two spaces
        between columns, an empty cell shown as '-' so each row has the same fields."""
        headers = [_header_field(column.header) for column in self.columns]
        rows = [
            [_plain_field(cell, column) for cell, column in zip(row, self.columns, strict=True)]
            for row in self.rows
        ]
        widths = [
            max(cell_len(text) for text in [header, *(row[i] for row in rows)])
            for i, header in enumerate(headers)
        ]
        lines = []
        for cells in [headers, *rows]:
            parts = []
            for text, column, width in zip(cells, self.columns, widths, strict=True):
                pad = " " * (width - cell_len(text))
                parts.append(pad + text if column.justify == "right" else text + pad)
            lines.append("  ".join(parts).rstrip())
        return lines

    def table(self, width: int) -> Table:
        # Bordered, then borderless, then without the flexible columns, all with every id
        # whole; only then do the ids fold, in a bordered table.
        boxed, widths = True, self._plan(width, boxed=True)
        if widths is None:
            boxed, widths = False, self._plan(width, boxed=False)
        if widths is None:
            widths = self._plan(width, boxed=False, flexible=False)
        if widths is None:
            boxed, widths = True, self._folded_plan(width, boxed=True)
        if widths is None:
            boxed, widths = False, self._folded_plan(width, boxed=False)
        assert widths is not None
        table = (
            Table(header_style="bold", title=self.title)
            if boxed
            else Table(
                header_style="bold", title=self.title, box=None, padding=(0, 1), pad_edge=False
            )
        )
        for index, column_width in sorted(widths.items()):
            column = self.columns[index]
            folds = column.role is Role.ID and column_width < self.natural[index]
            table.add_column(
                column.header,
                justify=column.justify,
                width=column_width,
                no_wrap=not folds,
                overflow="fold" if folds else "ellipsis",
            )
        for row in self.rows:
            table.add_row(*(row[index] for index in sorted(widths)))
        return table

    def _role(self, index: int) -> Role:
        return self.columns[index].role

    def _plan(self, width: int, boxed: bool, flexible: bool = True) -> dict[int, int] | None:
        """Column index -> content width with every id whole, or None when that cannot fit."""
        shown = [
            i
            for i, column in enumerate(self.columns)
            if column.role is not Role.OPTIONAL and (flexible or column.role is not Role.FLEX)
        ]
        if self._needed(shown, boxed, FLEX_MIN) > width:
            return None
        optional = [i for i, column in enumerate(self.columns) if column.role is Role.OPTIONAL]
        for index in sorted(optional, key=lambda i: self.columns[i].rank):
            trial = sorted([*shown, index])
            if self._needed(trial, boxed, FLEX_COMFORT) <= width:
                shown = trial
        return self._widths(shown, width, boxed)

    def _folded_plan(self, width: int, boxed: bool) -> dict[int, int] | None:
        """A table whose ids fold, flexible columns given up first if the id column would be
        narrower than FOLDED_ID_FLOOR. None if a bordered one cannot give it that; a
        borderless one is made anyway (and rich squeezes what it must)."""
        shown = [i for i in range(len(self.columns)) if self._role(i) is not Role.OPTIONAL]
        flexible = [i for i in shown if self._role(i) is Role.FLEX]
        while flexible and self._needed(shown, boxed, FLEX_MIN, FOLDED_ID_FLOOR) > width:
            shown.remove(flexible.pop())
        if boxed and self._needed(shown, boxed, FLEX_MIN, FOLDED_ID_FLOOR) > width:
            return None
        widths = self._widths(shown, width, boxed)
        excess = self._needed(shown, boxed, FLEX_MIN) - width
        for index in (i for i in shown if self._role(i) is Role.ID):
            cut = max(0, min(excess, widths[index] - min(widths[index], FOLDED_ID_FLOOR)))
            widths[index] -= cut
            excess -= cut
        flexible = [i for i in shown if self._role(i) is Role.FLEX]
        spare = width - _chrome(boxed, len(shown))
        spare -= sum(w for i, w in widths.items() if i not in flexible)
        shares = _share(spare, [self.natural[i] for i in flexible])
        widths.update(zip(flexible, shares, strict=True))
        return widths

    def _widths(self, shown: Sequence[int], width: int, boxed: bool) -> dict[int, int]:
        """Content widths: each column its own, the flexible ones sharing what is left."""
        widths = {i: self.natural[i] for i in shown if self._role(i) is not Role.FLEX}
        flexible = [i for i in shown if self._role(i) is Role.FLEX]
        spare = width - _chrome(boxed, len(shown)) - sum(widths.values())
        shares = _share(spare, [self.natural[i] for i in flexible])
        widths.update(zip(flexible, shares, strict=True))
        return widths

    def _needed(
        self, shown: Sequence[int], boxed: bool, flex_width: int, id_width: int | None = None
    ) -> int:
        """The width of a table of these columns: flexible ones at most `flex_width` wide, ids
        at most `id_width` (unlimited for None), every other column as wide as its content."""
        limits = {Role.FLEX: flex_width, Role.ID: id_width}
        content = sum(
            min(self.natural[i], limits.get(self.columns[i].role) or self.natural[i]) for i in shown
        )
        return _chrome(boxed, len(shown)) + content


def _header_field(header: str) -> str:
    """A header as one field: 'UPDATED (UTC)' becomes UPDATED_UTC."""
    return "_".join(header.replace("(", " ").replace(")", " ").split())


def _plain_field(cell: Text, column: Column) -> str:
    text = printable(cell.plain, single_line=True)
    if not text.strip():
        return "-"
    if (
        column.joiner == "_"
    ):  # a label: 'failed attempts, last minute' -> failed_attempts_last_minute
        text = text.replace(",", " ")
    return text if column.joiner == " " else column.joiner.join(text.split())


def show(table: FittedTable, plain_text: bool, empty: str = "") -> None:
    """The table for a terminal, or its plain lines (the header alone when it has no rows;
    `empty` is said instead at a terminal)."""
    if plain_text:
        sys.stdout.write("".join(line + "\n" for line in table.plain_lines()))
        return
    out = console()
    out.print(table if table.rows or not empty else empty)


def _as_text(cell: Text | str) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)


def _chrome(boxed: bool, count: int) -> int:
    """Characters a table spends on borders and padding: a border and two spaces per
    column and one more border when boxed; two spaces between columns when not."""
    return 3 * count + 1 if boxed else 2 * (count - 1)


def _share(spare: int, wants: Sequence[int]) -> list[int]:
    """`spare` split between columns that want `wants`, none more than it wants or below 1."""
    given = [0] * len(wants)
    left = max(spare, 0)
    open_ = [i for i, want in enumerate(wants) if want > 0]
    while left > 0 and open_:
        each = max(1, left // len(open_))
        for i in list(open_):
            add = min(each, wants[i] - given[i], left)
            given[i] += add
            left -= add
            if given[i] >= wants[i]:
                open_.remove(i)
    return [max(1, g) for g in given]


def jobs_table(jobs: Sequence[Job], now: int) -> FittedTable:
    """Jobs with id, state, priority and tries in full; NEXT RUN, EXIT and UPDATED when
    there is room; the command gets the rest. `now`: the store's clock."""
    columns = [
        Column("ID", Role.ID),
        Column("STATE"),
        Column("QUEUE", Role.OPTIONAL, rank=4),
        Column("PRI", justify="right"),
        Column("TRIES", justify="right"),
        Column("NEXT RUN", Role.OPTIONAL, rank=1),
        Column("UPDATED (UTC)", Role.OPTIONAL, joiner="T", rank=3),
        Column("EXIT", Role.OPTIONAL, justify="right", rank=2),
        Column("COMMAND", Role.FLEX),
    ]
    rows: list[list[Text | str]] = [
        [
            plain(job.id),
            state_text(job.state),
            plain(job.queue),
            str(job.priority),
            f"{job.attempts}/{job.max_retries + 1}",
            next_run(job, now),
            _when(job.updated_at),
            "" if job.exit_code is None else str(job.exit_code),
            plain(job.command),
        ]
        for job in jobs
    ]
    return FittedTable(columns, rows)


def dead_table(jobs: Sequence[Job]) -> FittedTable:
    columns = [
        Column("ID", Role.ID),
        Column("ATTEMPTS", justify="right"),
        Column("EXIT", justify="right"),
        Column("DIED (UTC)", Role.OPTIONAL, joiner="T"),
        Column("LAST ERROR", Role.FLEX),
        Column("COMMAND", Role.FLEX),
    ]
    rows: list[list[Text | str]] = [
        [
            plain(job.id),
            str(job.runs),
            "" if job.exit_code is None else str(job.exit_code),
            _when(job.updated_at),
            Text(last_line(job.last_error)),
            plain(job.command),
        ]
        for job in jobs
    ]
    return FittedTable(columns, rows)


def groups_table(groups: Sequence[ErrorGroup]) -> FittedTable:
    columns = [
        Column("JOBS", justify="right"),
        Column("FIRST (UTC)", Role.OPTIONAL, joiner="T"),
        Column("LAST (UTC)", Role.OPTIONAL, joiner="T"),
        Column("EXAMPLE", Role.ID),
        Column("FAILURE", Role.FLEX),
    ]
    rows: list[list[Text | str]] = [
        [
            f"{group.count:,}",
            _when(group.first_at),
            _when(group.last_at),
            plain(group.example),
            plain(group.fingerprint),
        ]
        for group in groups
    ]
    return FittedTable(columns, rows)


def counts_table(counts: QueueCounts) -> FittedTable:
    columns = [Column("STATE", joiner="_"), Column("JOBS", justify="right")]
    rows: list[list[Text | str]] = [
        [state_text(state), str(count)] for state, count in counts.by_state.items()
    ]
    rows.append([Text("total", style="bold"), Text(str(counts.total), style="bold")])
    rows.append(["active workers", str(counts.active_workers)])
    return FittedTable(columns, rows)


def queues_table(queues: Sequence[QueueInfo], now: int) -> FittedTable:
    columns = [
        Column("QUEUE", Role.ID),
        Column("STATE"),
        Column("WAITING", justify="right"),
        Column("RUNNING", justify="right"),
        Column("LIMIT", justify="right"),
        Column("OLDEST WAITING", justify="right"),
        Column("DONE", Role.OPTIONAL, justify="right", rank=1),
        Column("DEAD", Role.OPTIONAL, justify="right", rank=2),
        Column("CANCELLED", Role.OPTIONAL, justify="right", rank=3),
    ]
    rows: list[list[Text | str]] = [
        [
            plain(queue.name),
            Text("paused", style="bold yellow") if queue.paused else Text("running"),
            f"{queue.waiting:,}",
            f"{queue.running:,}",
            "-" if queue.max_running is None else str(queue.max_running),
            "-" if queue.oldest_due_at is None else human_age(queue.oldest_due_at, now),
            f"{queue.by_state.get(JobState.COMPLETED, 0):,}",
            f"{queue.by_state.get(JobState.DEAD, 0):,}",
            f"{queue.by_state.get(JobState.CANCELLED, 0):,}",
        ]
        for queue in queues
    ]
    return FittedTable(columns, rows)


def audit_table(entries: Sequence[AuditEntry]) -> FittedTable:
    columns = [
        Column("WHEN (UTC)", joiner="T"),
        Column("FACE"),
        Column("WHO"),
        Column("ACTION"),
        Column("JOBS", justify="right"),
        Column("ON", Role.FLEX),
    ]
    rows: list[list[Text | str]] = [
        [
            _when(entry.at),
            entry.face,
            plain(f"{entry.actor}@{entry.host}"),
            entry.action,
            str(entry.touched),
            plain(entry.subject),
        ]
        for entry in entries
    ]
    return FittedTable(columns, rows)


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


def stats_tables(stats: QueueStats) -> list[FittedTable]:
    of_queue = "" if stats.queue is None else f", queue {stats.queue}"
    summary_rows: list[list[Text | str]] = [
        ["completed, last minute", str(stats.completed_last_minute)],
        ["failed attempts, last minute", str(stats.failed_last_minute)],
        ["attempts, all time", str(stats.attempts_total)],
        ["failed attempts, all time", str(stats.attempts_failed)],
        ["retries run, all time", str(stats.retries)],
    ]
    summary = FittedTable(
        [Column("MEASURE", joiner="_"), Column("VALUE", justify="right")],
        summary_rows,
        title=f"Activity{of_queue}",
    )
    latency_rows: list[list[Text | str]] = [
        [label, *(_ms(values.get(key)) for key in ("avg", "p50", "p95"))]
        for label, values in (("queue wait", stats.wait_ms), ("run time", stats.run_ms))
    ]
    latency = FittedTable(
        [
            Column("LATENCY", joiner="_"),
            *(Column(name, justify="right", joiner="") for name in ("AVG", "P50", "P95")),
        ],
        latency_rows,
        title=f"Latency (last {stats.sample_size} attempts{of_queue})",
    )
    return [counts_table(stats.counts), summary, latency]


def workers_table(workers: Sequence[Worker], stale_after_s: float, now: int) -> FittedTable:
    """`now`: the store's clock, which heartbeats are stamped with."""
    columns = [
        Column("ID", Role.ID),
        Column("PID", Role.OPTIONAL, justify="right", rank=1),
        Column("HOST", Role.OPTIONAL, rank=4),
        Column("STATUS"),
        Column("STARTED (UTC)", Role.OPTIONAL, joiner="T", rank=5),
        Column("HEARTBEAT"),
        Column("JOB", Role.FLEX),
        Column("DONE", Role.OPTIONAL, justify="right", rank=2),
        Column("FAILED", Role.OPTIONAL, justify="right", rank=3),
    ]
    rows: list[list[Text | str]] = []
    for worker in workers:
        stale = worker.is_stale(now, stale_after_s)
        beat = Text(
            human_age(worker.last_heartbeat, now) + " ago", style="bold red" if stale else ""
        )
        rows.append(
            [
                plain(worker.id),
                str(worker.pid),
                plain(worker.host),
                Text(worker.status.value + (" (stale)" if stale else "")),
                _when(worker.started_at),
                beat,
                plain(worker.current_job or ""),
                str(worker.jobs_done),
                str(worker.jobs_failed),
            ]
        )
    return FittedTable(columns, rows)


def _linked(jobs: Sequence[JobLink]) -> Text:
    """Jobs a job runs after, or that run after it: each id with its state now."""
    shown = Text()
    for n, link in enumerate(jobs):
        if n:
            shown.append(", ")
        shown.append(printable(link.id, single_line=True))
        shown.append(" (")
        shown.append_text(state_text(link.state) if link.state else Text("deleted"))
        shown.append(")")
    return shown


def job_detail(
    job: Job, attempts: Sequence[Attempt], out: Console, links: JobLinks | None = None
) -> None:
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column()
    for key, value in job.to_dict().items():
        if key in ("after_any_end", "blocked_by") and not (links and links.parents):
            continue  # a job that runs after no other
        if key == "state":
            fields.add_row(key, state_text(job.state))
        elif key == "payload":  # JSON, as the job's command gets it
            fields.add_row(key, plain("" if job.payload is None else job.payload))
        elif key == "env":  # as a shell would set it, secret-looking values masked
            shown = " ".join(f"{name}={text}" for name, text in (value or {}).items())
            fields.add_row(key, plain(shown))
        else:
            fields.add_row(key, plain("" if value is None else value))
    if links is not None and links.parents:
        fields.add_row("after", _linked(links.parents))
    if links is not None and links.children:
        fields.add_row("dependents", _linked(links.children))
    out.print(fields)
    if not attempts:
        out.print(Text("\nNo attempts yet."))
        return
    columns = [
        Column("#", justify="right"),
        Column("WORKER", Role.OPTIONAL, rank=2),
        Column("STARTED (UTC)", Role.OPTIONAL, joiner="T", rank=1),
        Column("DURATION", justify="right"),
        Column("EXIT", justify="right"),
        Column("OUTCOME"),
        Column("ERROR", Role.FLEX),
    ]
    rows = [
        [
            str(attempt.number),
            plain(attempt.worker_id or ""),
            _when(attempt.started_at),
            _ms(attempt.finished_at - attempt.started_at),
            "" if attempt.exit_code is None else str(attempt.exit_code),
            attempt.outcome.value,
            Text(last_line(attempt.error)),
        ]
        for attempt in attempts
    ]
    out.print(Text("\nAttempts", style="bold"))
    out.print(FittedTable(columns, rows))
    latest = attempts[-1]
    out.print(Text(f"\nOutput of attempt {latest.number}:", style="bold"))
    out.print(Text(printable(latest.output) or "(no output)"))
