"""The schedules pane's table: each schedule's timing in words, time zone, next job (a
countdown), last job and how it went, and whether it is paused."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from ...presentation import countdown
from ...schedule_ops import ScheduleView
from .. import format as fmt
from .columns import ColumnSpec, ColumnTable


class SchedulesTable(ColumnTable[ScheduleView]):
    COLUMNS = (
        ColumnSpec("name", "NAME", 10, fit=32),
        ColumnSpec("status", "STATUS", 8),
        ColumnSpec("next", "NEXT", 11, right=True),
        ColumnSpec("last", "LAST JOB", 12, fit=44),
        ColumnSpec("outcome", "LAST RUN", 11),
        ColumnSpec("zone", "ZONE", 6, fit=22),
        ColumnSpec("when", "WHEN", 0),
    )

    def build(self, view: ScheduleView, now: int) -> tuple[str, Sequence[Text]]:
        schedule = view.schedule
        spec = schedule.spec
        if schedule.paused:
            status, next_text = Text("paused", style="bold yellow"), Text("-", style="dim")
        else:
            status = Text("active", style="green")
            next_text = Text(countdown(schedule.next_at, now) or "never")
        job = view.last_job
        if job is not None:
            outcome = fmt.state_text(job.state)
        elif schedule.last_job_id is not None:
            outcome = Text("gone", style="dim")  # pruned or deleted
        else:
            outcome = Text("-", style="dim")
        when = fmt.plain(spec.describe())
        when.append_text(fmt.plain(f"  {spec.timing}", style="dim"))
        return schedule.name, (
            fmt.plain(schedule.name),
            status,
            next_text,
            fmt.plain(schedule.last_job_id or "-"),
            outcome,
            fmt.plain(spec.timezone),
            when,
        )
