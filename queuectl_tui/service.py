"""The operations the CLI and the console share: one function per action, so that a key in the
console and its CLI twin do exactly the same thing."""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from .config import Settings
from .error_groups import ErrorGroup
from .errors import InvalidInput, NotFound
from .models import (
    Attempt,
    Job,
    JobSpec,
    JobSpecError,
    JobState,
    JobType,
    Operator,
    QueueCounts,
    Worker,
    WorkerStatus,
    parse_job_spec,
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
    open_store,
)


class InputError(InvalidInput):
    """Enqueue input that was refused; nothing was written."""


class NotFoundError(NotFound):
    """A job id that the queue does not know."""


def open_queue(settings: Settings) -> Store:
    """The queue for a command or the console: a missing database is created by the first
    write, never by a read."""
    options = StoreOptions(file_mode=settings.file_permissions, create_at_open=False)
    return open_store(settings.database, options)


# Longer than any number a job field accepts, and short enough to convert quickly.
_MAX_INT_DIGITS = 100


def _bounded_int(digits: str) -> int:
    """JSON integers as Python ints, except that one too long for any field (Python refuses to
    convert more than 4300 digits at all) becomes a value every field's range check refuses,
    so the error still names the field."""
    if len(digits.lstrip("-")) > _MAX_INT_DIGITS:
        return int(-(10**_MAX_INT_DIGITS) if digits.startswith("-") else 10**_MAX_INT_DIGITS)
    return int(digits)


def parse_job_json(text: str, job_types: Mapping[str, JobType] | None = None) -> JobSpec:
    """One job from JSON text, validated (InputError names the field); a typed job's type
    must be one of `job_types`."""
    try:
        obj = json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise InputError(f"invalid JSON: {error.msg} ({where})") from None
    except RecursionError:
        raise InputError("invalid JSON: values nested too deeply") from None
    try:
        return parse_job_spec(obj, job_types)
    except JobSpecError as error:
        raise InputError(str(error), error.field) from None


# Jobs validated per step of a bulk enqueue; the store inserts one step while the next is
# being validated.
BULK_BATCH = 20_000


def parse_job_batches(
    lines: Iterable[str],
    batch_size: int = BULK_BATCH,
    job_types: Mapping[str, JobType] | None = None,
) -> Iterator[list[JobSpec]]:
    """JSON Lines, one job per non-blank line, validated and yielded a batch at a time.

    Raises InputError naming the line at the first bad one, or at an id that appeared on an
    earlier line; a consumer that writes inside one transaction then writes nothing."""
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    seen: set[str] = set()
    for start in range(0, len(numbered), batch_size):
        chunk = numbered[start : start + batch_size]
        objects = _decode(chunk)
        try:
            specs = [parse_job_spec(obj, job_types) for obj in objects]
        except JobSpecError:  # find the first bad line again, to name it
            specs = [
                _validate(number, obj, job_types)
                for (number, _), obj in zip(chunk, objects, strict=True)
            ]
        before = len(seen)
        seen.update(spec.id for spec in specs)
        if len(seen) - before != len(specs):
            _repeated_id(numbered[: start + len(chunk)], specs, start, job_types)
        yield specs


def _repeated_id(
    numbered: list[tuple[int, str]],
    specs: list[JobSpec],
    start: int,
    job_types: Mapping[str, JobType] | None,
) -> None:
    """Raise InputError for the first id of this chunk that appeared on an earlier line (the
    rare path: the ids of earlier chunks are read again to find where)."""
    first_line_of: dict[str, int] = {}
    for number, line in numbered[:start]:
        spec = parse_job_spec(_decode_json(line), job_types)
        first_line_of.setdefault(spec.id, number)
    for spec, (number, _) in zip(specs, numbered[start:], strict=True):
        earlier = first_line_of.setdefault(spec.id, number)
        if earlier != number:
            raise InputError(f"line {number}: id '{spec.id}' already appears on line {earlier}")


_decode_json = json.JSONDecoder().decode
# The decoder's own scanner (C where available), called directly: one value from the start of
# a line, without decode()'s whitespace handling, which costs half the time of a short line.
_scan_json = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _decode(chunk: list[tuple[int, str]]) -> list[object]:
    # Each line parsed on its own: joining lines into one array would let a value that spans
    # two lines, or two values on one line, pass. A line that does not hold exactly one value
    # with nothing around it (white space included) takes the careful pass, which accepts
    # white space and words the error.
    try:
        scanned = [_scan_json(line, 0) for _, line in chunk]
    except (ValueError, RecursionError, StopIteration):  # also a number too long to convert
        return [_decode_line(number, line) for number, line in chunk]
    if all(end == len(line) for (_, end), (_, line) in zip(scanned, chunk, strict=True)):
        return [value for value, _ in scanned]
    return [_decode_line(number, line) for number, line in chunk]


def _decode_line(number: int, line: str) -> object:
    try:
        objects = json.loads("[" + line + "]", parse_int=_bounded_int)
    except json.JSONDecodeError as error:
        raise InputError(f"line {number}: invalid JSON: {error.msg}") from None
    except RecursionError:
        raise InputError(f"line {number}: invalid JSON: values nested too deeply") from None
    if len(objects) != 1:
        raise InputError(f"line {number}: one JSON object per line, found {len(objects)} values")
    return objects[0]


def _validate(number: int, obj: object, job_types: Mapping[str, JobType] | None) -> JobSpec:
    try:
        return parse_job_spec(obj, job_types)
    except JobSpecError as error:
        raise InputError(f"line {number}: {error}", error.field) from None


def enqueue(store: Store, settings: Settings, spec: JobSpec) -> EnqueueResult:
    return store.enqueue(spec, settings.max_retries, store.now())


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
    return store.submit(specs, settings.max_retries, store.now(), admission(settings), submitters)


def enqueue_lines(store: Store, settings: Settings, lines: Iterable[str]) -> BulkEnqueueResult:
    """Validate a JSON Lines input, then store it in one transaction: all or nothing.

    Validation happens before the transaction opens, so the write lock (which every worker's
    heartbeat needs too) is held only for the inserts themselves."""
    batches = list(parse_job_batches(lines, job_types=settings.job_types))
    return store.enqueue_batches(batches, settings.max_retries, store.now())


def enqueue_specs(store: Store, settings: Settings, specs: Sequence[JobSpec]) -> BulkEnqueueResult:
    """Store validated jobs in one transaction: all or nothing."""
    return store.enqueue_batches([specs], settings.max_retries, store.now())


def get_job(store: Store, job_id: str) -> Job:
    job = store.get(job_id)
    if job is None:
        raise NotFoundError(f"no job with id '{job_id}'")
    return job


def job_history(store: Store, job_id: str) -> tuple[Job, list[Attempt]]:
    """One job and its attempts, oldest first."""
    return get_job(store, job_id), store.attempts(job_id)


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
) -> JobPage:
    """One keyset page of jobs (in creation order, or newest first; of one queue if given)
    and how many there are."""
    jobs = store.list_jobs(
        state, limit=limit, after_seq=after_seq, newest_first=newest_first, queue=queue
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
) -> list[Job]:
    """One keyset page, newest first, of the jobs whose id or command contains `search` (of
    one queue, if given)."""
    return store.list_jobs(
        state, limit=limit, after_seq=after_seq, newest_first=True, search=search, queue=queue
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
) -> SearchPage:
    """One keyset page of the jobs a search (query.py) matches, within a state and queue if
    given, and how many match in all (when `count`; else -1). InputError for bad text."""
    try:
        query = parse_query(text, store.now())
    except InvalidInput as error:
        raise InputError(str(error), "query") from None
    jobs = store.list_jobs(state, limit, after_seq, newest_first, queue=queue, query=query)
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
    return store.list_jobs(JobState.DEAD, limit=limit, after_seq=after_seq)


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
    from .engine.pool import worker_shown_status  # /proc knowledge, loaded only when needed

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
    from .engine.pool import worker_is_running

    return [w for w in workers if worker_is_running(w, stale_after_s, now)]


def running_workers(store: Store, stale_after_s: float) -> list[Worker]:
    """The active workers of live pools (see `_live`)."""
    return _live(store.list_workers(active_only=True), stale_after_s, store.now())


def stop_pools(store: Store, stale_after_s: float) -> list[Worker]:
    """Ask every running pool to stop gracefully; returns the live workers that will obey: the
    ones active when the request was recorded (a pool still loading obeys it too, once it has
    registered)."""
    return _live(request_stop(store), stale_after_s, store.now())


def request_stop(store: Store) -> list[Worker]:
    """Ask every running pool on this database to stop gracefully; returns the workers that
    were active when the request was recorded."""
    return store.request_stop(store.now())


__all__ = [
    "InputError",
    "JobPage",
    "NotFoundError",
    "StoreError",
    "all_workers",
    "dead_jobs",
    "enqueue",
    "enqueue_lines",
    "enqueue_specs",
    "find_jobs",
    "get_job",
    "job_history",
    "list_jobs",
    "open_queue",
    "parse_job_batches",
    "parse_job_json",
    "queue_stats",
    "queue_status",
    "request_stop",
    "running_workers",
    "shown_status",
    "shown_workers",
    "stop_pools",
    "throughput",
]
