"""The dead letter pane's table: jobs that exhausted their retries, newest first."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from ...models import MAX_ID_LENGTH, Job
from ...timeutil import rough_age
from .. import format as fmt
from .columns import MARK, ColumnSpec, ColumnTable, mark_cell


class DeadTable(ColumnTable[Job]):
    COLUMNS = (
        MARK,
        ColumnSpec("id", "ID", 14, fit=MAX_ID_LENGTH + 1),
        ColumnSpec("runs", "RUNS", 6, right=True),
        ColumnSpec("exit", "EXIT", 6, right=True),
        ColumnSpec("died", "DIED", 8),
        ColumnSpec("error", "LAST ERROR", 0),
        ColumnSpec("command", "COMMAND", 22),
    )

    def time_key(self, job: Job, now: int) -> object:
        return rough_age(job.updated_at, now)

    def build(self, job: Job, now: int) -> tuple[str, Sequence[Text]]:
        return job.id, (
            mark_cell(job.id in self.marks),
            fmt.plain(job.id),
            fmt.number(job.runs),
            fmt.exit_text(job.exit_code),
            Text(rough_age(job.updated_at, now), style="dim"),
            fmt.error_line(job),
            fmt.plain(job.command),
        )
