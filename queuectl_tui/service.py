"""The operations the CLI and the console share: one function per action, so that a key in the
console and its CLI twin do exactly the same thing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .config import Settings
from .display import printable
from .error_groups import ErrorGroup
from .errors import InvalidInput, NotFound
from .job_input import (
    InputError,
    JobDocument,
    decode_json,
    is_json_job_text,
    line_of_id,
    parse_job_batches,
    parse_job_json,
    parse_job_object,
    read_document,
)
from .models import (
    Attempt,
    Job,
    JobDefaults,
    JobLinks,
    JobSpec,
    JobSpecError,
    JobState,
    Operator,
    QueueCounts,
    Worker,
    WorkerStatus,
    with_run_at,
)
from .query import parse_query
from .store import (
    Admission,
    BulkEnqueueResult,
    EnqueueResult,
    QueueStats,
    Store,
    StoreError,
    StoreOptions,
    SubmitResult,
    UnknownParent,
    open_store,
)


class NotFoundError(NotFound):
    """A job id that the queue does not know."""


def open_queue(settings: Settings) -> Store:
    """The queue for a command or the console: a missing database is created by the first
    write, never by a read."""
    options = StoreOptions(file_mode=settings.file_permissions, create_at_open=False)
    return open_store(settings.database, options)


# Longer than any number a job field accepts, and short enough to convert quickly.
def _timed(specs: Sequence[JobSpec], now: int) -> Sequence[JobSpec]:
    """The specs with their delays made run_at times from `now` (the same list if none has
    one: a million-job batch is not copied for nothing)."""
    if all(spec.delay is None for spec in specs):
        return specs
    return [with_run_at(spec, now) for spec in specs]


def enqueue(store: Store, settings: Settings, spec: JobSpec) -> EnqueueResult:
    now = store.now()
    return store.enqueue(with_run_at(spec, now), settings.max_retries, now)


def admission(settings: Settings) -> Admission:
    """How full the queue may get before a submission is refused (max-queue-depth, and each
    job type's max_queue_depth)."""
    limits = {
        name: job_type.max_queue_depth
        for name, job_type in settings.job_types.items()
        if job_type.max_queue_depth is not None
    }
    return Admission(settings.max_queue_depth or None, limits, settings.http_max_queues)


def submit(
    store: Store,
    settings: Settings,
    specs: Sequence[JobSpec],
    submitters: Sequence[Operator] = (),
) -> list[SubmitResult]:
    """Independent submissions in one durable transaction, each with its own outcome (and,
    with `submitters`, one per spec, each job created audited as theirs)."""
    now = store.now()
    return store.submit(
        _timed(specs, now), settings.max_retries, now, admission(settings), submitters
    )


def _defaulted(batch: Sequence[JobSpec], defaults: JobDefaults) -> list[JobSpec]:
    done = []
    for spec in batch:
        try:
            done.append(defaults.apply(spec))
        except JobSpecError as error:
            raise InputError(f"job {printable(spec.id, True)}: {error}", error.field) from None
    return done


def enqueue_lines(
    store: Store,
    settings: Settings,
    lines: Iterable[str] | JobDocument,
    defaults: JobDefaults | None = None,
) -> BulkEnqueueResult:
    """Validate a JSON Lines input (or a document's entries), then store it in one
    transaction: all or nothing (with `defaults` for what the jobs leave unset; InputError
    naming the line if one cannot).

    Validation happens before the transaction opens, so the write lock (which every worker's
    heartbeat needs too) is held only for the inserts themselves."""
    form = JobDocument.of(lines)  # read again to name the line of an unknown parent
    batches = list(parse_job_batches(form, job_types=settings.job_types))
    if defaults:
        batches = [_defaulted(batch, defaults) for batch in batches]
    now = store.now()
    timed = [_timed(batch, now) for batch in batches]
    try:
        return store.enqueue_batches(timed, settings.max_retries, now)
    except UnknownParent as error:
        number = line_of_id(form.entries, error.job_id, form.first)
        where = form.where(number) if number is not None else ""
        raise InputError(f"{where}{error}", "after") from None


def enqueue_text(
    store: Store, settings: Settings, text: str, defaults: JobDefaults | None = None
) -> BulkEnqueueResult:
    """`enqueue_lines` for a whole input, its form (JSON Lines, a JSON array, or objects
    written across lines) told from its content."""
    return enqueue_lines(store, settings, read_document(text), defaults)


def enqueue_specs(store: Store, settings: Settings, specs: Sequence[JobSpec]) -> BulkEnqueueResult:
    """Store validated jobs in one transaction: all or nothing."""
    now = store.now()
    return store.enqueue_batches([_timed(specs, now)], settings.max_retries, now)


def get_job(store: Store, job_id: str) -> Job:
    job = store.get(job_id)
    if job is None:
        raise NotFoundError(f"no job with id '{job_id}'")
    return job


def job_history(store: Store, job_id: str) -> tuple[Job, list[Attempt]]:
    """One job and its attempts, oldest first."""
    return get_job(store, job_id), store.attempts(job_id)


def job_links(store: Store, job_id: str, children: int = 1000) -> JobLinks:
    """The jobs `job_id` runs after, and (up to `children` of) those that run after it."""
    return store.job_links(job_id, children)


def links_view(links: JobLinks) -> dict[str, Any]:
    """A job's links as its JSON shows them: `after` (the jobs it runs after, each with its
    state now and how it ended for this job) and `dependents` (the jobs that run after it)."""
    return {
        "after": [link.to_dict() for link in links.parents],
        "dependents": [
            {"id": link.id, "state": link.state and link.state.value} for link in links.children
        ],
    }


@dataclass(frozen=True, slots=True)
class JobPage:
    jobs: list[Job]
    total: int  # jobs in the state asked for (all states: every job)


def list_jobs(
    store: Store,
    state: JobState | None = None,
    limit: int = 50,
    after_seq: int | None = None,
    newest_first: bool = False,
    queue: str | None = None,
    by_end: bool = False,
    after_end: int | None = None,
) -> JobPage:
    """One keyset page of jobs (in creation order, or newest first; of one queue if given;
    `by_end`: the ended ones in the order they ended) and how many there are."""
    jobs = store.list_jobs(
        state,
        limit=limit,
        after_seq=after_seq,
        newest_first=newest_first,
        queue=queue,
        by_end=by_end,
        after_end=after_end,
    )
    counts = store.counts(queue)
    return JobPage(jobs, counts.get(state, 0) if state else sum(counts.values()))


def find_jobs(
    store: Store,
    state: JobState | None,
    limit: int,
    after_seq: int | None = None,
    search: str | None = None,
    queue: str | None = None,
    by_end: bool = False,
) -> list[Job]:
    """One keyset page, newest first (`by_end`: the last to end first), of the jobs whose id
    or command contains `search` (of one queue, if given)."""
    return store.list_jobs(
        state,
        limit=limit,
        after_seq=after_seq,
        newest_first=True,
        search=search,
        queue=queue,
        by_end=by_end,
    )


@dataclass(frozen=True, slots=True)
class SearchPage:
    jobs: list[Job]
    matches: int  # every job the search matches, over all pages


def search_jobs(
    store: Store,
    text: str,
    limit: int,
    after_seq: int | None = None,
    newest_first: bool = True,
    state: JobState | None = None,
    queue: str | None = None,
    count: bool = True,
    by_end: bool = False,
    after_end: int | None = None,
) -> SearchPage:
    """One keyset page of the jobs a search (query.py) matches, within a state and queue if
    given (`by_end`: in the order they ended), and how many match in all (when `count`; else
    -1). InputError for bad text."""
    try:
        query = parse_query(text, store.now())
    except InvalidInput as error:
        raise InputError(str(error), "query") from None
    jobs = store.list_jobs(
        state,
        limit=limit,
        after_seq=after_seq,
        newest_first=newest_first,
        queue=queue,
        query=query,
        by_end=by_end,
        after_end=after_end,
    )
    if not count:
        return SearchPage(jobs, -1)
    narrowed = replace(
        query,
        states=(state,) if state else query.states,
        queues=(queue,) if queue else query.queues,
    )
    return SearchPage(jobs, store.count_jobs(narrowed))


def all_workers(store: Store) -> list[Worker]:
    """Every worker row as stored, running or ended."""
    return store.list_workers()


def running_since(store: Store, limit: int = 1000) -> dict[str, int]:
    """Each busy worker's id and when it claimed the job it runs (for how long it has run)."""
    running = store.list_jobs(JobState.PROCESSING, limit=limit)
    return {job.worker_id: job.claimed_at for job in running if job.worker_id and job.claimed_at}


def throughput(store: Store, now: int, minutes: int) -> tuple[list[int], list[int]]:
    """Completed and failed attempts in each of the last `minutes` minutes, oldest first."""
    return store.throughput(now, minutes)


def queue_status(store: Store, queue: str | None = None) -> QueueCounts:
    """Jobs per state (of one queue, if given) and the number of active workers, in constant
    time."""
    return store.queue_counts(queue)


def dead_jobs(store: Store, limit: int, after_seq: int | None = None) -> list[Job]:
    """One keyset page of the dead letters, the latest to die first."""
    return store.list_jobs(
        JobState.DEAD, limit=limit, after_seq=after_seq, newest_first=True, by_end=True
    )


def error_groups(
    store: Store, state: JobState = JobState.DEAD, limit: int = 100
) -> list[ErrorGroup]:
    """Dead (or failed) jobs grouped by how they failed, largest group first."""
    return store.error_groups(state, limit)


def queue_stats(store: Store, queue: str | None = None) -> QueueStats:
    """Counts, throughput, attempt totals and latencies, of every queue or of one."""
    return store.stats(store.now(), queue=queue)


def shown_status(worker: Worker, stale_after_s: float, now: int) -> WorkerStatus:
    """The status every face shows: HUNG for an active worker of a live pool on this host
    that has been silent past the stale timeout. `now` is the store's clock (Store.now), the
    one heartbeats are stamped with."""
    from .engine.liveness import worker_shown_status  # /proc knowledge, loaded only when needed

    return worker_shown_status(worker, stale_after_s, now)


# Workers that ended longer ago than this are history: shown only when asked for.
RECENT_WORKERS_MS = 3_600_000


def ended_recently(worker: Worker, now: int, within_ms: int = RECENT_WORKERS_MS) -> bool:
    """Not stopped or lost (running, or in a status this version does not know), or stopped or
    lost within the last `within_ms`."""
    if worker.status not in (WorkerStatus.STOPPED, WorkerStatus.LOST):
        return True
    return (worker.stopped_at or worker.last_heartbeat) >= now - within_ms


def shown_workers(
    store: Store, stale_after_s: float, active_only: bool = False, history: bool = True
) -> list[Worker]:
    """Every worker (or the active ones; without `history`, those running or ended in the
    last hour) with the status to show (see `shown_status`)."""
    now = store.now()
    return [
        replace(worker, status=shown_status(worker, stale_after_s, now))
        for worker in store.list_workers(active_only=active_only)
        if history or ended_recently(worker, now)
    ]


def _live(workers: list[Worker], stale_after_s: float, now: int) -> list[Worker]:
    """The workers that belong to a live pool: on this host its process exists (and is not a
    newer one that reused the pid); elsewhere its heartbeat is fresh. A pool that was killed
    leaves its workers marked active until another pool recovers them."""
    from .engine.liveness import worker_is_running

    return [w for w in workers if worker_is_running(w, stale_after_s, now)]


def running_workers(store: Store, stale_after_s: float) -> list[Worker]:
    """The active workers of live pools (see `_live`)."""
    return _live(store.list_workers(active_only=True), stale_after_s, store.now())


def running_pool(store: Store, name: str, stale_after_s: float) -> str:
    """The id of the running pool `name` names (its id, or one of its workers' ids);
    NotFoundError if no live pool is one."""
    for worker in running_workers(store, stale_after_s):
        if name in (worker.pool_id, worker.id):
            return worker.pool_id
    raise NotFoundError(f"no running pool '{name}' (queuectl workers lists them)")


def stop_pools(
    store: Store,
    stale_after_s: float,
    who: Operator,
    pool: str | None = None,
    forced: bool = False,
) -> list[Worker]:
    """Ask every running pool, or the one `pool` names (see `running_pool`), to stop:
    gracefully, or `forced` (their running commands are stopped now and the jobs handed back
    without spending an attempt). Recorded in the audit trail. Returns the live workers that
    will obey: the ones active when the request was recorded (a pool still loading obeys a
    request for every pool too, once it has registered)."""
    pool_id = None if pool is None else running_pool(store, pool, stale_after_s)
    asked = _live(store.request_stop(store.now(), pool_id, forced), stale_after_s, store.now())
    if asked:
        pools = len({worker.pool_id for worker in asked})
        whom = f"pool {pool_id}" if pool_id else f"{pools} pool(s)"
        detail = f"{whom} with {len(asked)} worker(s)" + (", forced" if forced else "")
        store.record_action(who.action("stop", detail), len(asked), store.now())
    return asked


__all__ = [
    "InputError",
    "JobPage",
    "NotFoundError",
    "StoreError",
    "all_workers",
    "dead_jobs",
    "decode_json",
    "enqueue",
    "enqueue_lines",
    "enqueue_specs",
    "enqueue_text",
    "find_jobs",
    "get_job",
    "is_json_job_text",
    "job_history",
    "list_jobs",
    "open_queue",
    "parse_job_batches",
    "parse_job_json",
    "parse_job_object",
    "queue_stats",
    "queue_status",
    "running_pool",
    "running_workers",
    "shown_status",
    "shown_workers",
    "stop_pools",
    "throughput",
]
