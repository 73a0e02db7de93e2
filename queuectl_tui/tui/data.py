"""What one refresh reads: a small, bounded set of queries whatever the size of the queue.

`read_snapshot` runs in a thread worker on the console's own reader connection; the UI thread
only renders what it returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .. import control, schedule_ops, service
from ..errors import InvalidInput
from ..models import ACTIVE_WORKER_STATUSES, Job, JobState, QueueCounts, QueueInfo, Worker
from ..store import Store

MAX_WORKER_ROWS = 200
THROUGHPUT_MINUTES = 15


class Pane(str, Enum):
    JOBS = "jobs"
    WORKERS = "workers"
    DEAD = "dead"
    QUEUES = "queues"
    SCHEDULES = "schedules"

    def __str__(self) -> str:
        return self.value

    @property
    def lists_jobs(self) -> bool:
        """A pane of jobs, paged and filtered (the others show every row they have)."""
        return self in (Pane.JOBS, Pane.DEAD)


@dataclass(frozen=True, slots=True)
class ViewRequest:
    """What the console shows: the pane, the state and text filter, and the page."""

    pane: Pane = Pane.JOBS
    state: JobState | None = None  # the jobs pane's state tab; None = all
    search: str = ""
    queue: str | None = None  # the jobs of this queue only
    anchor: int | None = None  # seq just above the page (newest first); None = first page
    page_size: int = 100
    page: int = 1  # shown with the rows of this request, never with rows of another
    history: bool = False  # the workers pane: every stored worker, not only recent ones

    @property
    def job_state(self) -> JobState | None:
        """The state of the jobs shown: the dead pane shows the DLQ, the jobs pane its tab."""
        return JobState.DEAD if self.pane is Pane.DEAD else self.state


@dataclass(slots=True)
class Snapshot:
    request: ViewRequest
    token: int
    counts: QueueCounts
    completed_per_minute: list[int] | None  # None: not read this time (keep the last)
    failed_per_minute: list[int] | None
    jobs: list[Job] = field(default_factory=list)  # the page of the jobs or dead pane
    more_jobs: bool = False  # there is a page after this one
    workers: list[Worker] = field(default_factory=list)
    queues: list[QueueInfo] = field(default_factory=list)
    schedules: list[schedule_ops.ScheduleView] = field(default_factory=list)
    queue_counts: QueueCounts | None = None  # of the queue the jobs are filtered by
    exists: bool = True  # there is a queue at the location (else reads answer from none)
    matches: int | None = None  # jobs the search matches over every page (None: not counted)
    search_error: str | None = None  # the search text could not be read: why
    running_since: dict[str, int] = field(default_factory=dict)  # worker id -> its job's claim

    @property
    def items(self) -> list[Any]:
        """The rows of the pane asked for."""
        if self.request.pane is Pane.WORKERS:
            return self.workers
        if self.request.pane is Pane.QUEUES:
            return self.queues
        if self.request.pane is Pane.SCHEDULES:
            return self.schedules
        return self.jobs


def read_snapshot(
    store: Store,
    request: ViewRequest,
    now: int,
    token: int,
    throughput: bool = True,
    count_matches: bool = False,
) -> Snapshot:
    """Counts, throughput (when asked: it is the dearest read at high job rates), and the one
    page the visible pane needs (with a search, and `count_matches`, how many match in all).
    `token` is the store's change token read just before."""
    counts = service.queue_status(store)
    completed: list[int] | None = None
    failed: list[int] | None = None
    if throughput:
        completed, failed = service.throughput(store, now, THROUGHPUT_MINUTES)
    snapshot = Snapshot(request, token, counts, completed, failed, exists=store.exists)
    if request.pane is Pane.WORKERS:
        recent = None if request.history else now - service.RECENT_WORKERS_MS
        snapshot.workers = ordered_workers(service.all_workers(store), recent)
        snapshot.running_since = service.running_since(store)
    elif request.pane is Pane.QUEUES:
        snapshot.queues = control.queue_overview(store)
    elif request.pane is Pane.SCHEDULES:
        snapshot.schedules = schedule_ops.list_schedules(store)
    else:
        limit = request.page_size + 1  # one more says whether a next page exists
        jobs: list[Job] = []
        by_end = request.pane is Pane.DEAD  # dead letters by time of death, the latest first
        if request.search:
            try:
                found = service.search_jobs(
                    store,
                    request.search,
                    limit,
                    request.anchor,
                    state=request.job_state,
                    queue=request.queue,
                    count=count_matches,
                    by_end=by_end,
                )
            except InvalidInput as error:
                snapshot.search_error = str(error)
            else:
                jobs = found.jobs
                snapshot.matches = found.matches if count_matches else None
        else:
            jobs = service.find_jobs(
                store,
                request.job_state,
                limit,
                after_seq=request.anchor,
                queue=request.queue,
                by_end=by_end,
            )
        if request.queue is not None:
            snapshot.queue_counts = service.queue_status(store, request.queue)
        snapshot.jobs = jobs[: request.page_size]
        snapshot.more_jobs = len(jobs) > request.page_size
    return snapshot


def ordered_workers(workers: list[Worker], ended_after: int | None = None) -> list[Worker]:
    """Running workers first (newest pool first), then the most recently ended ones (those
    that ended after `ended_after`, if given)."""
    active = [w for w in workers if w.status in ACTIVE_WORKER_STATUSES]
    ended = sorted(
        (
            w
            for w in workers
            if w.status not in ACTIVE_WORKER_STATUSES
            and (ended_after is None or service.ended_recently(w, ended_after, 0))
        ),
        key=lambda w: w.stopped_at or w.last_heartbeat,
        reverse=True,
    )
    return (active + ended)[:MAX_WORKER_ROWS]
