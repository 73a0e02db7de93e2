"""Schedules for people: the list's table, one schedule in full, and when its next job comes.
Every untrusted string goes in as rich.text.Text, never markup."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..display import printable
from ..presentation import STATE_STYLES, countdown
from ..schedule_ops import ScheduleView
from ..timeutil import to_iso_seconds
from .render import Column, FittedTable, Role, console, plain


def next_words(view: ScheduleView, now: int) -> str:
    schedule = view.schedule
    if schedule.paused:
        return "paused"
    if schedule.next_at is None:
        return "it never ticks again"
    when = to_iso_seconds(schedule.next_at)
    return f"next job at {when} UTC ({countdown(schedule.next_at, now)})"


def _state(view: ScheduleView) -> Text:
    job = view.last_job
    if job is None:
        return Text("-" if view.schedule.last_job_id is None else "gone", style="dim")
    return Text(job.state.value, style=STATE_STYLES.get(job.state, ""))


def _next(view: ScheduleView, now: int) -> Text:
    schedule = view.schedule
    if schedule.paused:
        return Text("paused", style="bold yellow")
    if schedule.next_at is None:
        return Text("never", style="dim")
    return Text(f"{to_iso_seconds(schedule.next_at)} ({countdown(schedule.next_at, now)})")


def table(views: Sequence[ScheduleView], now: int) -> FittedTable:
    columns = [
        Column("NAME", Role.ID),
        Column("SCHEDULE"),
        Column("NEXT (UTC)"),
        Column("LAST JOB", Role.OPTIONAL, rank=1),
        Column("STATE"),
        Column("TZ", Role.OPTIONAL, rank=2),
        Column("ORIGIN", Role.OPTIONAL, rank=3),
        Column("WHEN", Role.FLEX),
    ]
    rows: list[list[Text | str]] = []
    for view in views:
        spec = view.schedule.spec
        rows.append(
            [
                plain(view.name),
                plain(spec.timing),
                _next(view, now),
                plain(view.schedule.last_job_id or "-"),
                _state(view),
                plain(spec.timezone),
                plain(view.schedule.origin),
                plain(spec.describe()),
            ]
        )
    return FittedTable(columns, rows)


def detail(view: ScheduleView, now: int, out: Console) -> None:
    data = view.to_dict()
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column()
    fields.add_row("name", plain(view.name))
    fields.add_row("schedule", plain(f"{data['schedule']}  ({data['description']})"))
    fields.add_row("timezone", plain(data["timezone"]))
    fields.add_row("catch up", plain(data["catch_up"]))
    fields.add_row("next", Text(next_words(view, now)))
    fields.add_row("origin", plain(data["origin"]))
    for key, value in data["job"].items():
        if key == "env":
            value = " ".join(f"{name}={text}" for name, text in value.items())
        elif key == "payload":
            import json

            value = json.dumps(value, ensure_ascii=False)
        fields.add_row(f"job {key}", plain(value))
    last = view.schedule.last_job_id
    fields.add_row("last job", plain(last or "none yet"))
    if last is not None:
        fields.add_row("last state", _state(view))
        fields.add_row("last fired", plain(to_iso_seconds(view.schedule.last_fired_at) + " UTC"))
    fields.add_row("created", plain(to_iso_seconds(view.schedule.created_at) + " UTC"))
    out.print(fields)


def added(view: ScheduleView, now: int) -> None:
    spec = view.schedule.spec
    name = printable(view.name, single_line=True)
    words = printable(spec.describe(), single_line=True)
    console().print(
        Text(f"Schedule {name} added: {words} ({spec.timezone}); {next_words(view, now)}")
    )
