"""The storage interface. Engine, service, CLI and console speak only to this; SQLite is the
first implementation and a PostgreSQL store can implement the same methods later."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..error_groups import ErrorGroup
from ..errors import Conflict, Damaged, Unavailable
from ..lifecycle import RetryPolicy
from ..models import (
    Action,
    Attempt,
    AuditEntry,
    Job,
    JobLinks,
    JobSpec,
    JobState,
    Operator,
    Outcome,
    OutputChunk,
    QueueCounts,
    QueueInfo,
    StopKind,
    Worker,
    WorkerStatus,
)
from ..query import JobQuery
from ..schedules import Schedule
from ..timeutil import now_ms


class ChangeFeed(ABC):
    """Tells a waiting thread that the queue may have changed, by any process: wait until
    `fileno()` is readable (if the feed has one) or `wait_at_most()` seconds have passed,
    whichever comes first, then call `drain()`."""

    mode: str = ""  # how it detects changes, for the pool's start line

    @abstractmethod
    def fileno(self) -> int | None:
        """A descriptor that becomes readable when something may have changed, or None: the
        feed is then only drained every `wait_at_most()` seconds."""

    @abstractmethod
    def wait_at_most(self) -> float:
        """Seconds the waiter may sleep before draining again."""

    @abstractmethod
    def drain(self) -> bool:
        """Consume what woke the waiter; True if another connection committed since the last
        drain (and the change is visible now)."""

    @abstractmethod
    def close(self) -> None: ...


class StoreError(Unavailable):
    """A storage failure worth one plain sentence to the user."""


class DuplicateJobError(Conflict):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"a job with id '{job_id}' already exists")
        self.job_id = job_id


class DuplicateScheduleError(Conflict):
    def __init__(self, name: str) -> None:
        super().__init__(f"a schedule named '{name}' already exists")
        self.name = name


@dataclass(slots=True)
class ScheduleSync:
    """What keeping the config file's schedules in step changed, by name."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # held by another origin: left alone


class StoreBusyError(StoreError):
    """The database stayed locked beyond every retry."""


class StoreWaitingError(StoreBusyError):
    """Another process's write outlasted this store's wait for its turn; the store keeps its
    place in line, so trying again soon gets the next turn."""


class ForeignDatabaseError(StoreError):
    """The file is a database, but not a queue: queuectl refuses it and leaves it untouched."""

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"{location} is not a queuectl database ({reason}); it was left untouched")


class StoreCorrupt(Damaged):
    """SQLite found the database file damaged (or it is not a database at all). Not a
    StoreError on purpose: retrying cannot help, so nothing that retries store calls catches
    it; a pool that meets it stops."""

    def __init__(self, location: str, detail: str) -> None:
        super().__init__(
            f"the database {location} is damaged or is not a database ({detail}); "
            f"check it with: sqlite3 {location} 'PRAGMA integrity_check'"
        )
        self.location = location


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    job: Job
    created: bool  # False: an existing job with the same idempotency key was returned


@dataclass(frozen=True, slots=True)
class Admission:
    """How full the queue may get before a submission is refused (backpressure)."""

    max_depth: int | None = None  # jobs waiting to run (pending and failed), all queues
    type_limits: Mapping[str, int] = field(default_factory=dict)  # waiting jobs per type
    max_queues: int | None = None  # queues beyond which a submission may not create one


class Submitted(enum.Enum):
    CREATED = "created"
    EXISTING = "existing"  # its idempotency key was known: that job, nothing created
    DUPLICATE_ID = "duplicate_id"  # another job has its id: nothing created
    REJECTED = "rejected"  # the queue is full (Admission): nothing created
    NEW_QUEUE_REFUSED = "new_queue_refused"  # it names a queue that would be one too many
    UNKNOWN_PARENT = "unknown_parent"  # it runs after a job that does not exist: nothing created


@dataclass(frozen=True, slots=True)
class SubmitResult:
    status: Submitted
    job: Job | None  # the job created or found (CREATED, EXISTING)
    reason: str = ""  # why it was refused


@dataclass(frozen=True, slots=True)
class BulkEnqueueResult:
    created: int
    existing: int  # skipped because their idempotency key was already known


@dataclass(frozen=True, slots=True)
class Settlement:
    """The result of one run, as the worker that claimed `job` saw it."""

    job: Job  # the job as returned by claim: owner and attempt fence the update
    outcome: Outcome
    exit_code: int | None
    output: str
    error: str | None
    finished_at: int


@dataclass(frozen=True, slots=True)
class OutputAppend:
    """Live output of one running job, from the pool that runs it."""

    job_id: str
    run: int  # the job's `runs` as claimed: with the worker, it fences the write
    worker_id: str
    chunks: Sequence[OutputChunk]
    keep_from: int  # this run's pieces numbered below it fell out of the output limit


@dataclass(frozen=True, slots=True)
class SettleResult:
    state: JobState | None  # None: fenced out (the job was recovered meanwhile), nothing changed
    run_at: int | None  # when a failed job may run again


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """What a pool asks of one exchange: record `settlements` (runs that ended), then claim a
    job for each of `claimants` (its free workers, in order) from `queues` (None: any), as
    pool process `pid` at `now`; failed runs are retried by `policy`."""

    settlements: Sequence[Settlement]
    claimants: Sequence[str]
    pid: int
    now: int
    policy: RetryPolicy
    queues: Sequence[str] | None = None


@dataclass(frozen=True, slots=True)
class Exchange:
    """What one settle-and-claim transaction did."""

    settled: list[SettleResult]  # one per settlement, in the order given
    claimed: dict[str, Job]  # worker id -> the job claimed for it
    # Whether it may have given some worker work: a job back to pending (handed back, or a
    # retry, due now or later), a dependent freed, or a run ended in a queue with a limit
    # (room for one more). Otherwise other pools need not look, nor this one read again when
    # the next job is due.
    made_work: bool = True


@dataclass(frozen=True, slots=True)
class CancelResult:
    cancelled: list[str]  # were waiting: cancelled at once
    requested: list[str]  # were running: their pools stop them and record them cancelled


@dataclass(frozen=True, slots=True)
class RetryResult:
    fresh: list[str]  # dead or cancelled: pending again with a fresh retry budget
    ready: list[str]  # failed and waiting out a backoff: ready now, attempts kept
    # Not retried, each with why: a job it runs after ended without completing.
    blocked: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class QueueStats:
    counts: QueueCounts
    completed_last_minute: int = 0
    failed_last_minute: int = 0
    attempts_total: int = 0
    attempts_failed: int = 0
    retries: int = 0  # runs that were retries of an earlier failed run
    sample_size: int = 0  # attempts behind the latency figures
    wait_ms: dict[str, float | None] = field(default_factory=dict)  # avg, p50, p95
    run_ms: dict[str, float | None] = field(default_factory=dict)
    completed_per_minute: list[int] = field(default_factory=list)  # oldest first
    failed_per_minute: list[int] = field(default_factory=list)
    queue: str | None = None  # the figures are of this queue only

    def to_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "counts": self.counts.to_dict(),
            "throughput": {
                "completed_last_minute": self.completed_last_minute,
                "failed_last_minute": self.failed_last_minute,
                "completed_per_minute": self.completed_per_minute,
                "failed_per_minute": self.failed_per_minute,
            },
            "attempts": {
                "total": self.attempts_total,
                "failed": self.attempts_failed,
                "retries": self.retries,
            },
            "latency_ms": {
                "sample_size": self.sample_size,
                "queue_wait": self.wait_ms,
                "run_time": self.run_ms,
            },
        }


@dataclass(frozen=True, slots=True)
class Histogram:
    """The times of finished attempts, counted per bucket (not cumulatively)."""

    bounds_ms: tuple[int, ...]  # the buckets' upper bounds, ascending
    counts: tuple[int, ...]  # one per bound, then one for the bucket above the last (+Inf)
    sum_ms: int
    count: int


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """What metrics report, read at one moment from counters the store keeps as it goes."""

    jobs: Mapping[tuple[str, JobState], int]  # now; every state of every existing queue
    workers: Mapping[WorkerStatus, int]  # every stored status, 0 included
    oldest_waiting_ms: int | None  # the age of the longest-waiting due job, any queue
    # All time, per queue and outcome, queues gone included (series show existing ones).
    attempts: Mapping[tuple[str, Outcome], int]
    retries: int  # attempts that were runs after a job's first
    dead_lettered: int  # jobs that became dead
    late_results: int  # results turned away because their job was recovered meanwhile
    admission_rejected: int  # submissions refused because the queue was full
    queue_wait: Histogram  # from run_at to the claim
    run_time: Histogram  # from the claim to the result
    # The queues that exist: holding a job, or configured (paused, or given a limit).
    queues: frozenset[str] = frozenset()


class Store(ABC):
    """Durable jobs, attempts and workers. Every method is safe to call from one thread per
    store object; open one store per thread (or guard it) for concurrency."""

    location: str

    # -- lifecycle ---------------------------------------------------------------------------
    @abstractmethod
    def close(self) -> None: ...

    @property
    def exists(self) -> bool:
        """Whether there is a queue at the location yet (reads of one that is not there
        answer from an empty queue, and the first write creates it)."""
        return True

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def change_feed(self, mode: str = "auto", work_only: bool = False) -> ChangeFeed:
        """A feed of this queue's changes for one waiting thread, reading through this store
        (give it a store of its own). `mode` picks how a backend detects them, where it has
        a choice (SQLite: "inotify", "poll" or "auto"). With `work_only` a backend may tell
        at once only of commits that may give a worker work, and of the others later (SQLite:
        within half a second): what a pool's dispatcher needs. On the store's own connection,
        its own commits may not be told at all."""

    def now(self) -> int:
        """The time (ms since the epoch) that callers stamp this store's writes with and judge
        its times by: this host's clock by default; a store shared by several hosts answers
        with its database's clock, so that every host reads one clock."""
        return now_ms()

    @abstractmethod
    def change_token(self) -> int:
        """A number that changes whenever another connection commits: cheap change detection."""

    # -- jobs --------------------------------------------------------------------------------
    @abstractmethod
    def enqueue(self, spec: JobSpec, default_max_retries: int, now: int) -> EnqueueResult:
        """Durably store one job. Raises DuplicateJobError if its id is taken."""

    def enqueue_many(
        self, specs: Sequence[JobSpec], default_max_retries: int, now: int
    ) -> BulkEnqueueResult:
        """Store many jobs in one transaction: all or nothing (DuplicateJobError names one)."""
        return self.enqueue_batches([specs], default_max_retries, now)

    @abstractmethod
    def submit(
        self,
        specs: Sequence[JobSpec],
        default_max_retries: int,
        now: int,
        admission: Admission,
        submitters: Sequence[Operator] = (),
    ) -> list[SubmitResult]:
        """Many independent submissions in one durable transaction (a group commit): each is
        created, found by its idempotency key, refused for its id, refused because the
        queue is full (counted as an admission rejection) or would make one queue too many,
        on its own, in order. With `submitters` (one per spec), each job created gets an
        audit line naming who submitted it."""

    @abstractmethod
    def enqueue_batches(
        self, batches: Iterable[Sequence[JobSpec]], default_max_retries: int, now: int
    ) -> BulkEnqueueResult:
        """Store every batch in one transaction: all or nothing. `batches` may be a generator
        that validates input as it goes; an exception from it rolls everything back."""

    @abstractmethod
    def get(self, job_id: str) -> Job | None: ...

    @abstractmethod
    def attempts(self, job_id: str) -> list[Attempt]:
        """The attempt history of one job, oldest first."""

    @abstractmethod
    def job_links(self, job_id: str, children: int = 1000) -> JobLinks:
        """The jobs `job_id` runs after, as given, and up to `children` of those that run
        after it, oldest first."""

    @abstractmethod
    def append_output(self, appends: Sequence[OutputAppend]) -> None:
        """Keep live output of running jobs, in one transaction that does not wait for the
        disk (the result that follows it does). A piece whose job is no longer running that
        run under that worker is dropped; the job's pieces of earlier runs are forgotten, and
        so are this run's numbered below `keep_from`."""

    @abstractmethod
    def output_chunks(
        self, job_id: str, run: int, after_seq: int = -1, limit: int = 1000
    ) -> list[OutputChunk]:
        """The kept pieces of one run of a job numbered above `after_seq`, in order."""

    @abstractmethod
    def error_groups(self, state: JobState, limit: int = 100) -> list[ErrorGroup]:
        """The error groups of one state's jobs (dead, or failed), largest first."""

    @abstractmethod
    def error_group_ids(self, state: JobState, fingerprint: str) -> list[str]:
        """The ids of one state's jobs in one error group, in creation order."""

    @abstractmethod
    def list_jobs(
        self,
        state: JobState | None = None,
        *,
        limit: int = 50,
        after_seq: int | None = None,
        newest_first: bool = False,
        search: str | None = None,
        queue: str | None = None,
        query: JobQuery | None = None,
        by_end: bool = False,
        after_end: int | None = None,
    ) -> list[Job]:
        """One keyset page of jobs in creation order (or newest first).

        `after_seq` is the `seq` of the last job of the previous page; `search` matches a
        part of the id, the command or the last error; `queue` keeps that queue's jobs only;
        `query` (query.py) adds its qualifiers and free text; `by_end` orders the jobs that
        have ended by when they did (dead letters by time of death) instead, a page going on
        from `after_end` and `after_seq` (the last job's end and seq) if the end is given,
        else from where the job `after_seq` ended now."""

    @abstractmethod
    def count_jobs(self, query: JobQuery) -> int:
        """How many jobs match the query (a scan, unless its qualifiers or the text index
        narrow it)."""

    @abstractmethod
    def text_index(self) -> bool:
        """Whether free text is searched through a trigram index (`set_text_index`)."""

    @abstractmethod
    def set_text_index(self, on: bool) -> None:
        """Build the trigram index of every job's id, command and last error, kept from then
        on by every writer, or drop it. Building reads every job once."""

    @abstractmethod
    def counts(self, queue: str | None = None) -> dict[JobState, int]:
        """Jobs per state (of one queue, if given), in constant time."""

    @abstractmethod
    def queue_counts(self, queue: str | None = None) -> QueueCounts:
        """Jobs per state (of one queue, if given) and the number of active workers."""

    @abstractmethod
    def stats(self, now: int, sample: int = 10_000, queue: str | None = None) -> QueueStats:
        """Counts, throughput, attempt totals and the latencies of the latest `sample`
        attempts: of every queue, or of one."""

    @abstractmethod
    def throughput(
        self, now: int, minutes: int = 15, queue: str | None = None
    ) -> tuple[list[int], list[int]]:
        """Completed and failed attempts per minute over the last `minutes` minutes, oldest
        first; the last entry covers the last 60 seconds (of one queue, if given). Cancelled
        and interrupted runs are not counted.

        The console reads this every refresh, so it must stay cheap (a range over recent
        attempts, not a scan of the history)."""

    @abstractmethod
    def metrics(self, now: int) -> MetricsSnapshot:
        """Everything metrics report, read in one snapshot, in the same time however many jobs
        and attempts there are: from counters kept as jobs move, never by counting rows."""

    @abstractmethod
    def retry_dead(
        self, job_ids: Sequence[str] | None, now: int, action: Action | None = None
    ) -> list[str]:
        """Return dead jobs (all of them for None) to pending with a fresh retry budget, and
        record `action` in the audit trail in the same transaction.

        Returns the ids that were retried; ids that are not dead are left alone."""

    # -- an operator's control (each records its Action in the same transaction) ---------------
    @abstractmethod
    def job_states(self, job_ids: Sequence[str]) -> dict[str, JobState]:
        """The state of each of these jobs that exists."""

    @abstractmethod
    def cancel(self, job_ids: Sequence[str], now: int, action: Action | None) -> CancelResult:
        """Cancel waiting jobs at once; ask the pools running the running ones to stop them.
        Finished jobs are left alone. `action` goes into the audit trail in the same
        transaction (None: the caller records it, for an action made of several calls)."""

    @abstractmethod
    def cancel_requested(self, job_ids: Sequence[str]) -> list[str]:
        """Those of these running jobs that an operator asked to cancel."""

    @abstractmethod
    def retry(self, job_ids: Sequence[str], now: int, action: Action | None) -> RetryResult:
        """Dead and cancelled jobs back to pending with a fresh budget; failed ones waiting
        out their backoff ready now. Others are left alone. `action` as for cancel."""

    @abstractmethod
    def delete(
        self,
        job_ids: Sequence[str],
        now: int,
        action: Action | None,
        state: JobState | None = None,
    ) -> list[str]:
        """Remove these jobs with their attempts, except running ones (and, with `state`,
        those no longer in it: a delete by filter). Returns those removed. `action` as for
        cancel."""

    @abstractmethod
    def prune(self, state: JobState, before: int, limit: int) -> int:
        """Remove up to `limit` of the `state` jobs (completed, dead or cancelled) that
        finished before `before`, oldest first, in one short transaction. Returns how many."""

    def prune_all(
        self,
        state: JobState,
        before: int,
        batch: int,
        between: Callable[[], bool] | None = None,
    ) -> int:
        """`prune` batch after batch until none is left; `between` runs between two batches
        (a pause) and stops the pruning when it returns True. Returns how many went."""
        removed = 0
        while True:
            count = self.prune(state, before, batch)
            removed += count
            if count < batch or (between is not None and between()):
                return removed

    @abstractmethod
    def count_prunable(self, state: JobState, before: int) -> int: ...

    @abstractmethod
    def record_action(self, action: Action, touched: int, now: int) -> None:
        """Add a line to the audit trail (for actions that are not a single store call)."""

    @abstractmethod
    def actions(self, limit: int = 50, before_id: int | None = None) -> list[AuditEntry]:
        """The audit trail, newest first; `before_id` pages back."""

    # -- queues ----------------------------------------------------------------------------------
    @abstractmethod
    def queues(self, now: int) -> list[QueueInfo]:
        """Every queue that holds jobs or has settings, by name."""

    @abstractmethod
    def set_queue_paused(self, name: str, paused: bool, now: int, action: Action) -> None: ...

    @abstractmethod
    def set_queue_limit(self, name: str, limit: int | None, now: int, action: Action) -> None:
        """At most `limit` jobs of the queue run at once over every pool (None: no limit)."""

    # -- the engine's protocol ------------------------------------------------------------------
    @abstractmethod
    def exchange(self, request: ClaimRequest) -> Exchange:
        """One transaction: record each run's result (fenced by owner and run), then take the
        best eligible job for each worker in `claimants`, in order, while jobs are eligible.
        Eligible: due, of one of `queues` (any queue for None), not paused, and not beyond
        its queue's limit of running jobs. A worker that is no longer active (declared lost)
        is given nothing. Where each job goes is the lifecycle's rule (see lifecycle.py)."""

    def claim(self, worker_id: str, pid: int, now: int) -> Job | None:
        """Atomically take the best eligible job for this worker, or None."""
        request = ClaimRequest([], [worker_id], pid, now, RetryPolicy())
        return self.exchange(request).claimed.get(worker_id)

    def settle(self, settlement: Settlement, policy: RetryPolicy) -> SettleResult:
        """Record one run's result, fenced by owner and run."""
        job = settlement.job
        at = settlement.finished_at
        return self.exchange(
            ClaimRequest([settlement], [], job.worker_pid or 0, at, policy)
        ).settled[0]

    @abstractmethod
    def has_due_work(self, now: int, queues: Sequence[str] | None = None) -> bool:
        """Whether a worker serving `queues` (any for None) would find a job to claim now."""

    def wait_for_writers(self) -> None:
        """Return once no other process is in the middle of a write (in a store whose writers
        take turns; by default at once), so that a change being written is visible."""
        return None

    @abstractmethod
    def next_run_at(self, after: int) -> int | None:
        """The earliest `run_at` later than `after` among pending and failed jobs, or None:
        when an idle worker must look again (a retry's backoff ending, a job scheduled later)."""

    @abstractmethod
    def recover_orphans(
        self, dead_worker_ids: Sequence[str], policy: RetryPolicy, now: int
    ) -> list[Job]:
        """Mark the given workers lost, and send every processing job whose owner is not an
        active worker through the failure path with outcome `lost`. Returns those jobs as
        they are afterwards."""

    # -- workers -------------------------------------------------------------------------------
    @abstractmethod
    def register_workers(self, workers: Sequence[Worker]) -> int:
        """Store the workers' rows. Returns the id of the latest stop request, read in the
        same transaction: the pool obeys later ones (see `stop_requested_after`)."""

    @abstractmethod
    def heartbeat(self, worker_ids: Sequence[str], now: int) -> None: ...

    @abstractmethod
    def set_worker_status(
        self,
        worker_id: str,
        status: WorkerStatus,
        current_job: str | None,
        now: int,
        done: int = 0,
        failed: int = 0,
    ) -> None:
        """Set status and current job; add `done`/`failed` to the worker's counters."""

    @abstractmethod
    def list_workers(self, active_only: bool = False) -> list[Worker]: ...

    @abstractmethod
    def prune_workers(self, stopped_before: int) -> int:
        """Forget stopped and lost workers that ended before the given time."""

    @abstractmethod
    def request_stop(
        self, now: int, pool_id: str | None = None, forced: bool = False
    ) -> list[Worker]:
        """Ask every pool running now (or the one `pool_id` names) to stop: gracefully, or
        `forced`, cancelling its running jobs. Returns the workers that were active when the
        request was recorded (read in the same transaction), of that pool if one was named:
        exactly the workers that will see it, whichever way a pool's registration races
        with it."""

    @abstractmethod
    def stop_requested_after(self, request_id: int, pool_id: str) -> StopKind | None:
        """The strongest stop asked of this pool (for it, or for every pool) after the
        request with this id; None if none was."""

    @abstractmethod
    def stop_requested_since(self, since: int, pool_id: str) -> StopKind | None:
        """The strongest stop asked of this pool at or after `since` (its start time)."""

    # -- schedules (schedules.py: what they are; the engine's ticker fires them) ---------------
    @abstractmethod
    def schedules(self) -> list[Schedule]:
        """Every schedule, by name."""

    @abstractmethod
    def get_schedule(self, name: str) -> Schedule | None: ...

    @abstractmethod
    def add_schedule(self, schedule: Schedule, action: Action | None) -> None:
        """Store a new schedule (DuplicateScheduleError if the name is taken), with `action`
        in the audit trail in the same transaction."""

    @abstractmethod
    def remove_schedule(self, name: str, now: int, action: Action | None) -> bool:
        """Remove a schedule (its jobs stay); False if there is none of that name."""

    @abstractmethod
    def set_schedule_paused(
        self, name: str, paused: bool, next_at: int | None, now: int, action: Action | None
    ) -> bool:
        """Pause a schedule, or resume it from `next_at` (its next tick after now); False if
        there is none of that name."""

    @abstractmethod
    def fire_schedule(
        self,
        name: str,
        expected: int,
        next_at: int | None,
        specs: Sequence[JobSpec],
        default_max_retries: int,
        now: int,
    ) -> list[Job] | None:
        """In one transaction: move the schedule's next tick from `expected` on to `next_at`
        (a compare-and-set: only if it is still `expected` and the schedule is not paused)
        and insert the ticks' jobs as ordinary jobs of their queues. Returns the jobs made
        (a tick whose job exists, found by its idempotency key, makes none), or None when
        the compare-and-set failed and nothing changed."""

    @abstractmethod
    def run_schedule(
        self,
        name: str,
        spec: JobSpec,
        default_max_retries: int,
        now: int,
        action: Action | None,
    ) -> Job | None:
        """Make the schedule's job now, outside its ticks, recorded as its last job; None
        (nothing made) if there is no schedule of that name."""

    @abstractmethod
    def sync_schedules(
        self, declared: Sequence[Schedule], now: int, action: Action | None
    ) -> ScheduleSync:
        """Keep the schedules of the declared ones' origin (config) in step with them, in one
        transaction: see schedule_rows.sync."""
