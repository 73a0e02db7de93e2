"""Turning queue data into cells: every untrusted string becomes plain `Text` after
`printable()`, never markup, so a job cannot restyle or scramble the console."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from .. import presentation
from ..display import last_line, printable
from ..models import Job, JobState
from ..presentation import STATE_STYLES
from ..timeutil import human_age, to_iso_seconds

SPARK_BLOCKS = "▁▂▃▄▅▆▇█"


def plain(value: object, width: int | None = None, style: str = "") -> Text:
    """Untrusted text on one line, escapes made visible, cut to `width` with an ellipsis."""
    text = Text(printable(str(value), single_line=True) if value is not None else "", style=style)
    text.no_wrap = True
    if width is not None and text.cell_len > width:
        text.truncate(width, overflow="ellipsis")
    return text


def state_text(state: JobState) -> Text:
    return Text(state.value, style=STATE_STYLES.get(state, ""))


def number(value: int | None, style: str = "") -> Text:
    return Text("" if value is None else f"{value:,}", style=style, justify="right")


def timestamp(ms: int | None) -> str:
    """ISO 8601 UTC to the second, for fields in the job detail."""
    return "" if ms is None else to_iso_seconds(ms) + " UTC"


def next_run(job: Job, now: int) -> Text:
    """When a waiting job may run: a countdown for retries and scheduled jobs."""
    words, style = presentation.next_run(job, now)
    return Text(words, style=style)


def elapsed(job: Job, now: int) -> str:
    """How long a processing job has been running."""
    if job.state is not JobState.PROCESSING:
        return ""
    return human_age(job.claimed_at, now)


def attempts_text(job: Job) -> Text:
    words, style = presentation.attempts(job)
    return Text(words, style=style, justify="right")


def exit_text(code: int | None) -> Text:
    if code is None:
        return Text("")
    return Text(str(code), style=presentation.exit_style(code), justify="right")


def error_line(job: Job, width: int | None = None) -> Text:
    return plain(last_line(job.last_error), width)


def sparkline(values: Sequence[int], style: str) -> Text:
    """A one-line bar chart of per-minute counts, scaled to the largest value."""
    peak = max(values, default=0)
    if peak <= 0:
        return Text(SPARK_BLOCKS[0] * len(values), style="dim")
    top = len(SPARK_BLOCKS) - 1
    bars = "".join(
        SPARK_BLOCKS[0] if value <= 0 else SPARK_BLOCKS[max(1, round(value / peak * top))]
        for value in values
    )
    return Text(bars, style=style)
