"""The dead letter pane's table: jobs that exhausted their retries, newest first."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from ...models import Job
from ...timeutil import human_age
from .. import format as fmt
from .columns import MARK, ColumnSpec, ColumnTable, mark_cell


class DeadTable(ColumnTable[Job]):
    COLUMNS = (
        MARK,
        ColumnSpec("id", "ID", 14, fit=64),
        ColumnSpec("runs", "RUNS", 6, right=True),
        ColumnSpec("exit", "EXIT", 6, right=True),
        ColumnSpec("died", "DIED", 8),
        ColumnSpec("error", "LAST ERROR", 0),
        ColumnSpec("command", "COMMAND", 22),
    )

    def build(self, job: Job, now: int) -> tuple[str, Sequence[Text]]:
        return job.id, (
            mark_cell(job.id in self.marks),
            fmt.plain(job.id),
            fmt.number(job.runs),
            fmt.exit_text(job.exit_code),
            Text(human_age(job.updated_at, now), style="dim"),
            fmt.error_line(job),
            fmt.plain(job.command),
        )
