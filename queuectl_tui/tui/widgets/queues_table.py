"""The queues pane's table: each queue's depth, running jobs, pause and limit."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from ...models import JobState, QueueInfo
from ...timeutil import rough_age
from .. import format as fmt
from .columns import ColumnSpec, ColumnTable


class QueuesTable(ColumnTable[QueueInfo]):
    COLUMNS = (
        ColumnSpec("name", "QUEUE", 0),
        ColumnSpec("state", "STATE", 9),
        ColumnSpec("waiting", "WAITING", 10, right=True),
        ColumnSpec("running", "RUNNING", 9, right=True),
        ColumnSpec("limit", "LIMIT", 7, right=True),
        ColumnSpec("oldest", "WAITED", 9, right=True),
        ColumnSpec("done", "DONE", 10, right=True),
        ColumnSpec("dead", "DEAD", 8, right=True),
        ColumnSpec("cancelled", "CANCELLED", 10, right=True),
    )

    def time_key(self, queue: QueueInfo, now: int) -> object:
        return None if queue.oldest_due_at is None else rough_age(queue.oldest_due_at, now)

    def build(self, queue: QueueInfo, now: int) -> tuple[str, Sequence[Text]]:
        dead = queue.by_state.get(JobState.DEAD, 0)
        return queue.name, (
            fmt.plain(queue.name),
            Text("paused", style="bold yellow") if queue.paused else Text("running"),
            fmt.number(queue.waiting),
            fmt.number(queue.running),
            Text("-" if queue.max_running is None else str(queue.max_running)),
            Text("-" if queue.oldest_due_at is None else rough_age(queue.oldest_due_at, now)),
            fmt.number(queue.by_state.get(JobState.COMPLETED, 0)),
            fmt.number(dead, style="red" if dead else ""),
            fmt.number(queue.by_state.get(JobState.CANCELLED, 0)),
        )
