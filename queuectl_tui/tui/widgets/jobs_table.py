"""The jobs pane's table: one keyset page of jobs, newest first."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from ... import presentation
from ...models import FINISHED_STATES, MAX_ID_LENGTH, Job, JobState
from ...timeutil import rough_age
from .. import format as fmt
from .columns import MARK, ColumnSpec, ColumnTable, mark_cell

ENDED_STATES = (*FINISHED_STATES, JobState.FAILED)  # the last attempt is over


class JobsTable(ColumnTable[Job]):
    COLUMNS = (
        MARK,
        ColumnSpec("id", "ID", 13, fit=MAX_ID_LENGTH + 1),
        ColumnSpec("state", "STATE", 11),
        ColumnSpec("priority", "PRI", 4, right=True),
        ColumnSpec("attempts", "TRY", 5, right=True),
        ColumnSpec("next_run", "NEXT RUN", 9),
        ColumnSpec("updated", "UPDATED", 8),
        ColumnSpec("worker", "WORKER", 10, fit=40),
        ColumnSpec("exit", "EXIT", 5, right=True),
        ColumnSpec("command", "COMMAND", 0),
    )

    def time_key(self, job: Job, now: int) -> object:
        return presentation.next_run(job, now)[0], rough_age(job.updated_at, now)

    def build(self, job: Job, now: int) -> tuple[str, Sequence[Text]]:
        return job.id, (
            mark_cell(job.id in self.marks),
            fmt.plain(job.id),
            fmt.state_text(job.state),
            fmt.number(job.priority),
            fmt.attempts_text(job),
            fmt.next_run(job, now),
            Text(rough_age(job.updated_at, now), style="dim"),
            fmt.plain(job.worker_id or ""),
            # A waiting or running job's exit code is its previous attempt's: not shown.
            fmt.exit_text(job.exit_code if job.state in ENDED_STATES else None),
            fmt.plain(job.command),
        )
