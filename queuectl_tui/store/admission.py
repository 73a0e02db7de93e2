"""Submissions one at a time in one transaction (the HTTP face's group commit), for every
backend: each is created, found by its idempotency key, refused for its id, or refused
because the queue is full; a backend gives the reads and the insert."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..models import Job, JobSpec, Operator
from .base import Admission, DuplicateJobError, EnqueueResult, SubmitResult, Submitted
from .dependencies import UnknownParent
from .rows import audit_row


class Room:
    """How many more jobs the queue (and each type) takes under an admission policy, kept up
    to date as the transaction inserts. The counts are read once, when first needed."""

    def __init__(
        self,
        admission: Admission,
        waiting: Callable[[], int],
        waiting_of_type: Callable[[str], int],
        queues: Callable[[], Iterable[str]] = tuple,
    ) -> None:
        self._admission = admission
        self._read_waiting = waiting
        self._read_of_type = waiting_of_type
        self._read_queues = queues
        self._waiting: int | None = None
        self._of_type: dict[str, int] = {}
        self._queues: set[str] | None = None

    def new_queue_refusal(self, spec: JobSpec) -> str:
        """Why the job may not make its queue, one more than `max_queues` ('' if it may)."""
        limit = self._admission.max_queues
        if limit is None:
            return ""
        if self._queues is None:
            self._queues = set(self._read_queues())
        if spec.queue in self._queues or len(self._queues) < limit:
            return ""
        return (
            f"no queue '{spec.queue}' exists and this server makes no more than {limit:,} "
            "queues (http-max-queues): send it to an existing queue"
        )

    def refusal(self, spec: JobSpec) -> str:
        """Why the job may not be added now ('' if it may)."""
        limit = self._admission.max_depth
        if limit is not None:
            if self._waiting is None:
                self._waiting = self._read_waiting()
            if self._waiting >= limit:
                return f"the queue is full: {self._waiting:,} jobs wait to run (limit {limit:,})"
        kind = spec.job_type
        type_limit = None if kind is None else self._admission.type_limits.get(kind)
        if kind is not None and type_limit is not None:
            if kind not in self._of_type:
                self._of_type[kind] = self._read_of_type(kind)
            if self._of_type[kind] >= type_limit:
                return (
                    f"jobs of type '{kind}' are full: {self._of_type[kind]:,} wait to run "
                    f"(limit {type_limit:,})"
                )
        return ""

    def took(self, job: Job) -> None:
        if self._waiting is not None:
            self._waiting += 1
        if job.job_type in self._of_type:
            self._of_type[job.job_type] += 1
        if self._queues is not None:
            self._queues.add(job.queue)


def submit_each(
    specs: Sequence[JobSpec],
    room: Room,
    known: Callable[[str], Job | None],
    insert: Callable[[JobSpec], EnqueueResult],
) -> tuple[list[SubmitResult], int]:
    """Each submission's outcome, in order, and how many were refused for a full queue.
    `known` finds a job by idempotency key; `insert` stores one (DuplicateJobError for a
    taken id, without spoiling the transaction)."""
    results: list[SubmitResult] = []
    rejected = 0
    for spec in specs:
        if spec.idempotency_key is not None:
            found = known(spec.idempotency_key)
            if found is not None:  # a replay is answered even when the queue is full
                results.append(SubmitResult(Submitted.EXISTING, found))
                continue
        new_queue = room.new_queue_refusal(spec)
        if new_queue:
            results.append(SubmitResult(Submitted.NEW_QUEUE_REFUSED, None, new_queue))
            continue
        refusal = room.refusal(spec)
        if refusal:
            rejected += 1
            results.append(SubmitResult(Submitted.REJECTED, None, refusal))
            continue
        try:
            created = insert(spec)
        except DuplicateJobError as error:
            results.append(SubmitResult(Submitted.DUPLICATE_ID, None, str(error)))
            continue
        except UnknownParent as error:
            results.append(SubmitResult(Submitted.UNKNOWN_PARENT, None, str(error)))
            continue
        if not created.created:  # another transaction took the key meanwhile: that job
            results.append(SubmitResult(Submitted.EXISTING, created.job))
            continue
        room.took(created.job)
        results.append(SubmitResult(Submitted.CREATED, created.job))
    return results, rejected


def audit_rows(
    results: Sequence[SubmitResult], submitters: Sequence[Operator], now: int
) -> list[dict[str, object]]:
    """The audit line of each job created, naming who submitted it (never its command or
    payload, which may hold secrets)."""
    rows: list[dict[str, object]] = []
    for result, who in zip(results, submitters, strict=False):
        job = result.job
        if result.status is Submitted.CREATED and job is not None:
            kind = f"type {job.job_type}" if job.job_type else "a command"
            subject = f"{job.id} ({kind}) to queue {job.queue}"
            rows.append(audit_row(who.action("submit", subject), 1, now))
    return rows


def insert_params(spec: JobSpec, default_max_retries: int, now: int) -> dict[str, object]:
    """A new job's parameters for each backend's insert_job statement."""
    return dict(zip(INSERT_COLUMNS, insert_values(spec, default_max_retries, now), strict=True))


# The columns of a new job, in the order of insert_values (PostgreSQL's COPY takes them so).
INSERT_COLUMNS = (
    "id",
    "command",
    "priority",
    "run_at",
    "max_retries",
    "timeout",
    "idempotency_key",
    "created_at",
    "updated_at",
    "queue",
    "job_type",
    "payload",
    "cwd",
    "env",
)


def insert_values(spec: JobSpec, default_max_retries: int, now: int) -> tuple[object, ...]:
    """A new job's values in the order of each backend's insert_job statement: id, command,
    priority, run_at, max_retries, timeout, idempotency_key, created_at, updated_at, queue,
    job_type, payload, cwd, env."""
    return (
        spec.id,
        spec.command,
        spec.priority,
        now if spec.run_at is None else spec.run_at,
        default_max_retries if spec.max_retries is None else spec.max_retries,
        spec.timeout,
        spec.idempotency_key,
        now,
        now,
        spec.queue,
        spec.job_type,
        spec.payload,
        spec.cwd,
        spec.env,
    )
