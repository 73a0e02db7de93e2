"""The workers pane's table: heartbeat ages tick every second; stale workers stand out."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from ... import presentation, service
from ...models import Worker, WorkerStatus
from ...timeutil import human_age
from .. import format as fmt
from .columns import ColumnSpec, ColumnTable


class WorkersTable(ColumnTable[Worker]):
    COLUMNS = (
        ColumnSpec("id", "WORKER", 14, fit=60),
        ColumnSpec("pid", "PID", 8, right=True),
        ColumnSpec("host", "HOST", 12),
        ColumnSpec("status", "STATUS", 15),
        ColumnSpec("heartbeat", "HEARTBEAT", 13),
        ColumnSpec("job", "JOB", 0),
        ColumnSpec("running", "RUNNING", 9, right=True),
        ColumnSpec("done", "DONE", 7, right=True),
        ColumnSpec("failed", "FAILED", 7, right=True),
    )

    def __init__(self, *, id: str | None = None, stale_after_s: float = 15.0) -> None:
        super().__init__(id=id)
        self.stale_after_s = stale_after_s
        self.running_since: dict[str, int] = {}  # worker id -> when its job was claimed

    def build(self, worker: Worker, now: int) -> tuple[str, Sequence[Text]]:
        stale = worker.is_stale(now, self.stale_after_s)
        shown = worker.status
        if stale:  # /proc is read only for the rare silent worker
            shown = service.shown_status(worker, self.stale_after_s, now)
        status = Text(shown.value, style=presentation.WORKER_STYLES.get(shown, ""))
        if stale and shown is not WorkerStatus.HUNG:
            status = Text(f"{worker.status.value} STALE", style="bold white on red")
        beat = Text(human_age(worker.last_heartbeat, now) + " ago")
        if stale:
            beat.stylize("bold red")
        elif worker.status.value in ("stopped", "lost"):
            beat.stylize("dim")
        return worker.id, (
            fmt.plain(worker.id),
            Text(str(worker.pid)),
            fmt.plain(worker.host),
            status,
            beat,
            fmt.plain(worker.current_job or ""),
            Text(self._running_for(worker, now), style="bold yellow"),
            fmt.number(worker.jobs_done),
            fmt.number(worker.jobs_failed, style="red" if worker.jobs_failed else ""),
        )

    def _running_for(self, worker: Worker, now: int) -> str:
        since = self.running_since.get(worker.id) if worker.current_job else None
        return "" if since is None else human_age(since, now)
