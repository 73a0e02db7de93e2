"""The queue's vocabulary: job states, jobs, attempts, workers, and validated enqueue input.

`parse_job_spec` is the one validator of job input: the CLI, the console and any future
front end call it, so a job is accepted or refused for the same reasons everywhere.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple

from .display import is_utf8, printable
from .errors import InvalidInput
from .timeutil import parse_duration, parse_iso, to_iso


class JobState(str, Enum):
    PENDING = "pending"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"  # failed, retry scheduled at run_at
    DEAD = "dead"  # retries exhausted: the dead letter queue
    CANCELLED = "cancelled"  # an operator cancelled it: never run again unless retried
    # It runs after other jobs (`after`) that have not all ended yet (lifecycle.after_parents).
    WAITING = "waiting"

    def __str__(self) -> str:
        return self.value


STATES: tuple[JobState, ...] = tuple(JobState)
# Claimable once run_at has come. (Queue figures call these jobs "waiting" to run, the
# state WAITING aside: a job in it waits for other jobs, not for a worker.)
WAITING_STATES = (JobState.PENDING, JobState.FAILED)
FINISHED_STATES = (JobState.COMPLETED, JobState.DEAD, JobState.CANCELLED)


class Outcome(str, Enum):
    """How one attempt ended."""

    COMPLETED = "completed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    LOST = "lost"  # the worker died or vanished mid-job
    CANCELLED = "cancelled"  # an operator cancelled the run: the job ends cancelled
    INTERRUPTED = "interrupted"  # stopped by a forced shutdown; costs no attempt
    # Read, never written: a stored value this version does not know (another program or a
    # newer version wrote it). One odd row must not make the job's history unreadable.
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> Outcome:
        return cls.UNKNOWN


class WorkerStatus(str, Enum):
    IDLE = "idle"
    BUSY = "busy"
    STOPPING = "stopping"
    STOPPED = "stopped"
    LOST = "lost"
    # Shown, never stored: an active worker of a live pool on this host that has been silent
    # past the stale timeout (frozen, or its dispatcher hangs).
    HUNG = "hung"
    # Read, never written: a stored status this version does not know.
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> WorkerStatus:
        return cls.UNKNOWN


class StopKind(str, Enum):
    """How a pool is asked to stop."""

    GRACEFUL = "graceful"  # claim nothing more, let the running jobs finish, exit
    # ... and stop the running commands now: their jobs go back to waiting, interrupted, without
    # spending an attempt
    FORCED = "forced"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, forced: object) -> StopKind | None:
        """The kind a stored request (or the strongest of several) says: NULL none, 0 or 1."""
        if forced is None:
            return None
        return cls.FORCED if forced else cls.GRACEFUL


ACTIVE_WORKER_STATUSES = (WorkerStatus.IDLE, WorkerStatus.BUSY, WorkerStatus.STOPPING)
# What a worker's row can hold: HUNG is only shown, UNKNOWN only read.
STORED_WORKER_STATUSES = (*ACTIVE_WORKER_STATUSES, WorkerStatus.STOPPED, WorkerStatus.LOST)

# Limits on enqueue input; generous, but they keep numbers inside SQLite's 64-bit integers.
MAX_ID_LENGTH = 200
MAX_KEY_LENGTH = 200
MAX_PRIORITY = 2**31 - 1
MAX_RETRIES_LIMIT = 100
MAX_TIMEOUT_SECONDS = 7 * 86400
DEFAULT_QUEUE = "default"
# A typed job's payload, as JSON text: it travels in the environment too (QUEUECTL_PAYLOAD),
# where Linux allows one variable 128 KiB.
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_QUEUE_LIMIT = 100_000  # running jobs of one queue at once, over every pool
QUEUE_NAME_RULE = "1 to 64 letters, digits, '-', '_' or '.'"
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# run_at: whole days that every reader can show as a four-digit year, whatever the offset.
RUN_AT_RANGE_TEXT = ("0001-01-02", "9999-12-30")
MIN_RUN_AT = parse_iso(RUN_AT_RANGE_TEXT[0] + "T00:00:00Z")
MAX_RUN_AT = parse_iso(RUN_AT_RANGE_TEXT[1] + "T23:59:59.999Z")


@dataclass(frozen=True, slots=True)
class Job:
    seq: int  # creation order; the key for keyset paging
    id: str
    command: str
    state: JobState
    priority: int
    run_at: int  # epoch ms: not claimed before
    max_retries: int
    timeout: float | None  # seconds; None = the configured job_timeout
    attempts: int  # attempts spent in the current retry budget
    runs: int  # every run ever started, across DLQ retries
    idempotency_key: str | None
    created_at: int
    updated_at: int
    claimed_at: int | None
    worker_id: str | None
    worker_pid: int | None
    finished_at: int | None
    exit_code: int | None
    last_error: str | None
    queue: str = DEFAULT_QUEUE
    cancel_requested_at: int | None = None  # an operator asked to cancel it while it ran
    job_type: str | None = None  # a typed job: its type's command gets `payload` on stdin
    payload: str | None = None  # JSON text
    error_group: str | None = None  # a failed run's fingerprint (error_groups.py)
    cwd: str | None = None  # its runs' working directory; None: the pool's
    env: str | None = None  # JSON text: names and values its runs get beside the pool's
    # It runs once the jobs it runs after (JobLinks) have all ended, not only completed.
    after_any_end: bool = False
    # Cancelled because this job, which it runs after, ended without completing: retrying
    # that job brings this one back.
    blocked_by: str | None = None

    @property
    def environment(self) -> dict[str, str]:
        """What the job adds to its runs' environment, as given."""
        found: dict[str, str] = json.loads(self.env) if self.env else {}
        return found

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of a job, times as ISO 8601 UTC."""
        return {
            "id": self.id,
            "command": self.command,
            "queue": self.queue,
            "state": self.state.value,
            "attempts": self.attempts,
            "max_retries": self.max_retries,
            "priority": self.priority,
            "run_at": to_iso(self.run_at),
            "created_at": to_iso(self.created_at),
            "updated_at": to_iso(self.updated_at),
            "timeout": self.timeout,
            "runs": self.runs,
            "idempotency_key": self.idempotency_key,
            "claimed_at": to_iso(self.claimed_at),
            "worker_id": self.worker_id,
            "worker_pid": self.worker_pid,
            "finished_at": to_iso(self.finished_at),
            "exit_code": self.exit_code,
            "last_error": self.last_error,
            "cancel_requested_at": to_iso(self.cancel_requested_at),
            "type": self.job_type,
            "payload": None if self.payload is None else json.loads(self.payload),
            "error_group": self.error_group,
            "cwd": self.cwd,
            "env": masked_environment(self.environment) if self.env else None,
            "after_any_end": bool(self.after_any_end),
            "blocked_by": self.blocked_by,
        }


# Names whose values are not shown anywhere: what a password, key or token is usually called.
_SECRET_NAME = re.compile(
    r"pass|pwd|secret|token|key|auth|credential|private|cookie|session|signature|salt|cert"
    r"|dsn",
    re.IGNORECASE,
)
# A URL's user and password (postgres://u:pw@host, HTTPS_PROXY=http://u:p@proxy), whatever
# the variable is called.
_URL_USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*://)[^/@\s]+@", re.IGNORECASE)
MASK = "********"


def masked_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment as it may be shown: the values of names that look secret masked, and
    the credentials in any URL."""
    return {
        name: MASK if _SECRET_NAME.search(name) else _URL_USERINFO.sub(rf"\1{MASK}@", value)
        for name, value in env.items()
    }


@dataclass(frozen=True, slots=True)
class Attempt:
    job_id: str
    number: int  # 1 for the first run of the job, counting across DLQ retries
    worker_id: str | None
    scheduled_at: int  # when the job became eligible for this run
    started_at: int
    finished_at: int
    exit_code: int | None
    outcome: Outcome
    output: str
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "worker_id": self.worker_id,
            "scheduled_at": to_iso(self.scheduled_at),
            "started_at": to_iso(self.started_at),
            "finished_at": to_iso(self.finished_at),
            "exit_code": self.exit_code,
            "outcome": self.outcome.value,
            "output": self.output,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class JobLink:
    """Another job a job runs after (a parent), or one that runs after it (a child)."""

    id: str
    state: JobState | None  # its state now; None: it was deleted
    # For a parent: how it ended as far as the child is concerned (completed, dead,
    # cancelled or deleted); None while it has not ended.
    ended: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": None if self.state is None else self.state.value,
            "ended": self.ended,
        }


@dataclass(frozen=True, slots=True)
class JobLinks:
    """The jobs a job runs after, in the order given, and the jobs that run after it."""

    parents: tuple[JobLink, ...] = ()
    children: tuple[JobLink, ...] = ()


class Stream(str, Enum):
    """Which of a command's output streams a piece of its output came from."""

    STDOUT = "stdout"
    STDERR = "stderr"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class OutputChunk:
    """A piece of a run's output, stored while the run goes on (live output)."""

    seq: int  # 0, 1, 2… within the run
    stream: Stream
    text: str
    at: int  # when the pool read it (ms)
    byte_offset: int  # bytes of the run's output (both streams) before this piece

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "stream": self.stream.value,
            "text": self.text,
            "at": to_iso(self.at),
            "byte_offset": self.byte_offset,
        }


@dataclass(frozen=True, slots=True)
class Worker:
    id: str
    pool_id: str
    pid: int
    host: str
    status: WorkerStatus
    started_at: int
    last_heartbeat: int
    stopped_at: int | None
    current_job: str | None
    jobs_done: int
    jobs_failed: int
    # The boot and PID namespace `pid` belongs to (engine/identity.py); "" when unknown.
    pid_namespace: str = ""

    def is_stale(self, now: int, stale_after_s: float) -> bool:
        """Active, yet silent for longer than a pool waits before declaring it lost."""
        silent_s = (now - self.last_heartbeat) / 1000
        return self.status in ACTIVE_WORKER_STATUSES and silent_s > stale_after_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pool_id": self.pool_id,
            "pid": self.pid,
            "host": self.host,
            "status": self.status.value,
            "started_at": to_iso(self.started_at),
            "last_heartbeat": to_iso(self.last_heartbeat),
            "stopped_at": to_iso(self.stopped_at),
            "current_job": self.current_job,
            "jobs_done": self.jobs_done,
            "jobs_failed": self.jobs_failed,
            "pid_namespace": self.pid_namespace,
        }


class JobSpec(NamedTuple):
    """Validated enqueue input. `max_retries` None means "the configured default".

    A NamedTuple, not a dataclass: bulk enqueue builds a hundred thousand of these, and a
    tuple is both the cheapest to make and serialises straight to a JSON array."""

    id: str
    command: str
    priority: int = 0
    run_at: int | None = None  # epoch ms; None = now
    max_retries: int | None = None
    timeout: float | None = None
    idempotency_key: str | None = None
    queue: str = DEFAULT_QUEUE
    job_type: str | None = None
    payload: str | None = None  # JSON text, only with a job_type
    # Milliseconds from the enqueue, instead of a run_at; the service makes it a run_at by the
    # store's clock (`with_run_at`), so no store sees it.
    delay: int | None = None
    cwd: str | None = None  # the runs' working directory; None: the pool's
    env: str | None = None  # JSON text of names and values added to the pool's environment
    # The ids of jobs it runs after (made before it); it waits until they have completed
    # (or, with after_any_end, ended in any way).
    after: tuple[str, ...] = ()
    after_any_end: bool = False


def with_run_at(spec: JobSpec, now: int) -> JobSpec:
    """The spec with its delay, if it has one, turned into the run_at it means at `now`."""
    if spec.delay is None:
        return spec
    return spec._replace(run_at=min(now + spec.delay, MAX_RUN_AT), delay=None)


def replay_difference(
    job: Job, spec: JobSpec, default_max_retries: int, id_given: bool
) -> str | None:
    """The first field in which `spec` asks for another job than `job`, the one its
    idempotency key already names (None: the same job asked for again). The time it runs is
    not compared: a job's `run_at` moves as it is retried."""
    wanted = {
        "id": spec.id if id_given else job.id,
        "command": spec.command,
        "type": spec.job_type,
        "payload": None if spec.payload is None else json.loads(spec.payload),
        "queue": spec.queue,
        "priority": spec.priority,
        "max_retries": default_max_retries if spec.max_retries is None else spec.max_retries,
        "timeout": spec.timeout,
        "cwd": spec.cwd,
        "env": None if spec.env is None else json.loads(spec.env),
    }
    stored = {
        "id": job.id,
        "command": job.command,
        "type": job.job_type,
        "payload": None if job.payload is None else json.loads(job.payload),
        "queue": job.queue,
        "priority": job.priority,
        "max_retries": job.max_retries,
        "timeout": job.timeout,
        "cwd": job.cwd,
        "env": None if job.env is None else json.loads(job.env),
    }
    return next((name for name in wanted if wanted[name] != stored[name]), None)


@dataclass(frozen=True, slots=True)
class JobType:
    """A named kind of job (config.json `job_types`): the command its jobs run, given their
    payload as JSON on stdin and in QUEUECTL_PAYLOAD, and the defaults a job may override
    within bounds: its timeout, retries and priority are the most a job of the type may ask
    for (it may ask for less), and its queue is `queue` or one of `queues`."""

    name: str
    command: str
    max_retries: int | None = None
    timeout: float | None = None
    priority: int = 0
    queue: str = DEFAULT_QUEUE
    max_queue_depth: int | None = None  # waiting jobs of this type beyond which HTTP says 429
    queues: tuple[str, ...] = ()  # the other queues a job of this type may name


class JobSpecError(InvalidInput):
    """Enqueue input that cannot be accepted; the message names the field."""


JOB_FIELDS = (
    "id",
    "command",
    "type",
    "payload",
    "queue",
    "priority",
    "run_at",
    "delay",
    "max_retries",
    "timeout",
    "idempotency_key",
    "cwd",
    "env",
    "after",
    "after_any_end",
)
_JOB_FIELD_SET = frozenset(JOB_FIELDS)


def new_job_id() -> str:
    """A random 16-hex-digit id; 64 bits make a collision in a million jobs negligible."""
    return os.urandom(8).hex()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_unicode(value: str, name: str) -> None:
    # A lone surrogate (a \ud800 escape in JSON, or a byte that is not UTF-8 in argv, which
    # Python decodes to one) cannot be stored as text; refuse it here, before the store.
    if not is_utf8(value):
        raise JobSpecError(
            f"field '{name}' is not valid UTF-8 text (it holds a lone surrogate)", name
        )


def _text(value: Any, name: str, max_length: int) -> str:
    if not isinstance(value, str):
        raise JobSpecError(f"field '{name}' must be a string", name)
    if not 1 <= len(value) <= max_length:
        raise JobSpecError(f"field '{name}' must be 1 to {max_length} characters long", name)
    if not value.isprintable():
        raise JobSpecError(f"field '{name}' must contain printable characters only", name)
    return value


def _job_id(value: Any) -> str:
    """A job id as given: printable, and no blanks around it (an id that differs from another
    only by a space would look like it, in every list)."""
    job_id = _text(value, "id", MAX_ID_LENGTH)
    if job_id.isspace():
        raise JobSpecError("field 'id' must not be blank", "id")
    if job_id != job_id.strip():
        raise JobSpecError("field 'id' must not begin or end with whitespace", "id")
    return job_id


def _integer(value: Any, name: str, low: int, high: int) -> int:
    if not _is_int(value):
        raise JobSpecError(f"field '{name}' must be an integer", name)
    if not low <= value <= high:
        raise JobSpecError(f"field '{name}' must be between {low} and {high}", name)
    return int(value)


def _run_at(value: Any) -> int:
    if not isinstance(value, str):
        raise JobSpecError("field 'run_at' must be an ISO 8601 time string", "run_at")
    try:
        ms = parse_iso(value)
    except (ValueError, OverflowError, OSError):
        raise JobSpecError(f"field 'run_at' is not an ISO 8601 time: {value!r}", "run_at") from None
    if not MIN_RUN_AT <= ms <= MAX_RUN_AT:
        low, high = RUN_AT_RANGE_TEXT
        raise JobSpecError(
            f"field 'run_at' must be between {low} and {high} (UTC), not {value!r}", "run_at"
        )
    return ms


MAX_DELAY_MS = 100 * 365 * 86_400_000  # a hundred years
MAX_CWD_LENGTH = 4096  # PATH_MAX
MAX_ENV_BYTES = 64 * 1024  # a job's own environment, as JSON
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _cwd(value: Any) -> str:
    """An absolute directory path: the runs start there (a relative one would depend on
    which pool runs it)."""
    if not isinstance(value, str) or not value.startswith("/"):
        raise JobSpecError("field 'cwd' must be an absolute path such as /srv/reports", "cwd")
    if len(value) > MAX_CWD_LENGTH or "\x00" in value:
        message = f"field 'cwd' must be at most {MAX_CWD_LENGTH} characters, without NUL"
        raise JobSpecError(message, "cwd")
    _check_unicode(value, "cwd")
    return value


def _env(value: Any) -> str:
    """Names and values for the runs' environment, as the JSON text stored."""
    if not isinstance(value, dict):
        raise JobSpecError('field \'env\' must be an object such as {"K": "V"}', "env")
    for name, text in value.items():
        if ENV_NAME.fullmatch(name) is None or name.startswith("QUEUECTL_"):
            shown = printable(name, single_line=True)
            raise JobSpecError(
                f"field 'env': {shown!r} is not a name a job may set (letters, digits and _, "
                "not starting with a digit or QUEUECTL_)",
                "env",
            )
        if not isinstance(text, str) or "\x00" in text:
            raise JobSpecError(f"field 'env': the value of {name} must be text without NUL", "env")
        _check_unicode(text, "env")
    encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(encoded.encode()) > MAX_ENV_BYTES:
        raise JobSpecError(f"field 'env' must be at most {MAX_ENV_BYTES // 1024} KiB", "env")
    return encoded


@dataclass(frozen=True, slots=True)
class JobDefaults:
    """What the submitter gives every job that does not say it itself (`enqueue --delay
    --cwd --env`), validated as the fields are."""

    delay: int | None = None
    cwd: str | None = None
    env: str | None = None  # JSON text
    after: tuple[str, ...] = ()
    after_any_end: bool = False

    @classmethod
    def of(
        cls,
        delay: Any = None,
        cwd: Any = None,
        env: Any = None,
        after: Any = None,
        after_any_end: bool = False,
    ) -> JobDefaults:
        """From raw values (JobSpecError naming the field for a bad one)."""
        if after_any_end and not after:
            raise JobSpecError(
                "field 'after_any_end' needs 'after': the jobs to wait for", "after_any_end"
            )
        return cls(
            None if delay is None else _delay(delay),
            None if cwd is None else _cwd(cwd),
            None if env is None else _env(env),
            () if after is None else _after(after, ""),
            after_any_end,
        )

    def apply(self, spec: JobSpec) -> JobSpec:
        """The spec with what it leaves unset taken from here; JobSpecError for a typed job
        given a directory or an environment (its type says how it runs), or a job told to
        run after itself."""
        if spec.job_type is not None and (self.cwd is not None or self.env is not None):
            field = "cwd" if self.cwd is not None else "env"
            raise JobSpecError(
                f"field '{field}' is not for typed jobs: their type says how they run", field
            )
        when = self.delay if spec.run_at is None and spec.delay is None else spec.delay
        own_after = bool(spec.after)
        if not own_after and spec.id in self.after:
            shown = printable(spec.id, True)
            raise JobSpecError(f"job '{shown}' cannot run after itself", "after")
        return spec._replace(
            delay=when,
            cwd=spec.cwd if spec.cwd is not None else self.cwd,
            env=spec.env if spec.env is not None else self.env,
            after=spec.after if own_after else self.after,
            after_any_end=spec.after_any_end if own_after else self.after_any_end,
        )

    def __bool__(self) -> bool:
        given = (self.delay, self.cwd, self.env)
        return any(value is not None for value in given) or bool(self.after)


def _delay(value: Any) -> int:
    """A delay as milliseconds: a duration ('90s', '10m', '2h', '7d', '2w') or seconds."""
    if isinstance(value, str):
        try:
            ms = parse_duration(value)
        except ValueError as error:
            raise JobSpecError(f"field 'delay': {error}", "delay") from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        if value * 1000 > MAX_DELAY_MS:
            raise JobSpecError("field 'delay' must be at most a hundred years", "delay")
        ms = int(value * 1000)
    else:
        message = "field 'delay' must be a duration such as '10m' or a number of seconds"
        raise JobSpecError(message, "delay")
    if ms > MAX_DELAY_MS:
        raise JobSpecError("field 'delay' must be at most a hundred years", "delay")
    return ms


def _timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise JobSpecError("field 'timeout' must be a number of seconds", "timeout")
    if not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise JobSpecError(
            f"field 'timeout' must be greater than 0 and at most {MAX_TIMEOUT_SECONDS}", "timeout"
        )
    return float(value)


def parse_job_spec(obj: Any, job_types: Mapping[str, JobType] | None = None) -> JobSpec:
    """Validate one decoded JSON value as enqueue input: a job with a `command`, or a typed
    job (`type` and `payload`), whose command and defaults come from `job_types`.

    Raises JobSpecError naming the offending field; never returns a partially valid spec.
    Only the fields present are examined, which keeps bulk validation cheap."""
    if obj.__class__ is dict and len(obj) <= 2:
        # The common bulk line, {"id": ..., "command": ...}, checked in one expression; any
        # doubt goes the long way, which words the error.
        command = obj.get("command")
        raw_id = obj.get("id")
        if (
            command.__class__ is str
            and raw_id.__class__ is str
            and len(obj) == 2
            and command.isascii()
            and raw_id.isascii()
            and 0 < len(raw_id) <= MAX_ID_LENGTH
            and raw_id.isprintable()
            and raw_id[0] != " " != raw_id[-1]
            and not command.isspace()
            and command
            and "\x00" not in command
        ):
            return JobSpec(raw_id, command)
    if not isinstance(obj, dict):
        raise JobSpecError("a job must be a JSON object")
    if not obj.keys() <= _JOB_FIELD_SET:
        name = sorted(obj.keys() - _JOB_FIELD_SET)[0]
        shown = printable(name, single_line=True)
        raise JobSpecError(f"unknown field '{shown}' (known: {', '.join(JOB_FIELDS)})", name)

    if "type" in obj or "payload" in obj:
        return _typed_job_spec(obj, job_types or {})
    command = obj.get("command")
    if command is None:
        raise JobSpecError("field 'command' is required", "command")
    if not isinstance(command, str):
        raise JobSpecError("field 'command' must be a string", "command")
    if not command or command.isspace():
        raise JobSpecError("field 'command' must not be empty", "command")
    if "\x00" in command:
        raise JobSpecError("field 'command' must not contain NUL characters", "command")
    _check_unicode(command, "command")

    raw_id = obj.get("id")
    job_id = new_job_id() if raw_id is None else _job_id(raw_id)
    if len(obj) == (1 if "id" not in obj else 2):  # just a command (and an id)
        return JobSpec(job_id, command)

    priority = obj.get("priority")
    max_retries = obj.get("max_retries")
    run_at = obj.get("run_at")
    delay = obj.get("delay")
    if delay is not None and run_at is not None:
        raise JobSpecError("give a job either 'run_at' or 'delay', not both", "delay")
    timeout = obj.get("timeout")
    key = obj.get("idempotency_key")
    queue = obj.get("queue")
    after = () if obj.get("after") is None else _after(obj["after"], job_id)
    any_end = obj.get("after_any_end")
    if any_end is not None and not isinstance(any_end, bool):
        raise JobSpecError("field 'after_any_end' must be true or false", "after_any_end")
    if any_end and not after:
        raise JobSpecError(
            "field 'after_any_end' needs 'after': the jobs to wait for", "after_any_end"
        )
    return JobSpec(
        job_id,
        command,
        0 if priority is None else _integer(priority, "priority", -MAX_PRIORITY, MAX_PRIORITY),
        None if run_at is None else _run_at(run_at),
        None if max_retries is None else _integer(max_retries, "max_retries", 0, MAX_RETRIES_LIMIT),
        None if timeout is None else _timeout(timeout),
        None if key is None else _text(key, "idempotency_key", MAX_KEY_LENGTH),
        DEFAULT_QUEUE if queue is None else queue_name(queue, "queue"),
        delay=None if delay is None else _delay(delay),
        cwd=None if obj.get("cwd") is None else _cwd(obj["cwd"]),
        env=None if obj.get("env") is None else _env(obj["env"]),
        after=after,
        after_any_end=bool(any_end),
    )


MAX_AFTER = 1000  # jobs one job may run after


def _after(value: Any, job_id: str) -> tuple[str, ...]:
    """The ids a job runs after: a list, or one string of ids separated by commas."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    if not isinstance(value, list) or not value:
        raise JobSpecError(
            "field 'after' must be job ids: a list, or ids separated by commas", "after"
        )
    if len(value) > MAX_AFTER:
        raise JobSpecError(f"field 'after' may name at most {MAX_AFTER} jobs", "after")
    ids = tuple(dict.fromkeys(_text(item, "after", MAX_ID_LENGTH) for item in value))
    if job_id in ids:
        raise JobSpecError(f"job '{printable(job_id, True)}' cannot run after itself", "after")
    return ids


def _typed_job_spec(obj: dict[str, Any], job_types: Mapping[str, JobType]) -> JobSpec:
    if "command" in obj:
        raise JobSpecError("give a job either a 'command' or a 'type', not both", "command")
    for fixed in ("cwd", "env"):
        # Its type fixes how it runs: whoever may submit the type (an anonymous HTTP client)
        # may not point it at another directory or change its environment (LD_PRELOAD).
        if fixed in obj:
            message = f"field '{fixed}' is not for typed jobs: their type says how they run"
            raise JobSpecError(message, fixed)
    name = obj.get("type")
    if name is None:
        raise JobSpecError("field 'payload' needs a 'type' whose command gets it", "type")
    if not isinstance(name, str):
        raise JobSpecError("field 'type' must be a string", "type")
    job_type = job_types.get(name)
    if job_type is None:
        shown = printable(name, single_line=True)
        known = ", ".join(sorted(job_types)) or "none are configured (config.json job_types)"
        raise JobSpecError(f"unknown job type '{shown}' (known: {known})", "type")
    payload = _payload(obj.get("payload"))
    fields = {key: value for key, value in obj.items() if key not in ("type", "payload")}
    fields["command"] = job_type.command
    base = parse_job_spec(fields)
    _check_within_type(base, obj, job_type)
    return base._replace(
        priority=job_type.priority if obj.get("priority") is None else base.priority,
        max_retries=job_type.max_retries if base.max_retries is None else base.max_retries,
        timeout=job_type.timeout if base.timeout is None else base.timeout,
        queue=job_type.queue if obj.get("queue") is None else base.queue,
        job_type=job_type.name,
        payload=payload,
    )


def _check_within_type(spec: JobSpec, obj: dict[str, Any], job_type: JobType) -> None:
    """A typed job may ask for less than its type gives, never for more: whoever may submit
    the type (an anonymous HTTP client) gets no longer runs, more retries, a place ahead of
    the line or another queue than the type's settings allow."""
    of_type = f"for jobs of type '{job_type.name}'"
    most_timeout, most_retries = job_type.timeout, job_type.max_retries
    if most_timeout is not None and spec.timeout is not None and spec.timeout > most_timeout:
        message = f"field 'timeout' may be at most {most_timeout:g} s {of_type}"
        raise JobSpecError(message, "timeout")
    if (
        most_retries is not None
        and spec.max_retries is not None
        and spec.max_retries > most_retries
    ):
        raise JobSpecError(
            f"field 'max_retries' may be at most {most_retries} {of_type}", "max_retries"
        )
    if obj.get("priority") is not None and spec.priority > job_type.priority:
        message = f"field 'priority' may be at most {job_type.priority} {of_type}"
        raise JobSpecError(message, "priority")
    allowed = (job_type.queue, *job_type.queues)
    if obj.get("queue") is not None and spec.queue not in allowed:
        names = ", ".join(f"'{name}'" for name in allowed)
        raise JobSpecError(f"field 'queue' must be one of {names} {of_type}", "queue")


def _payload(value: Any) -> str:
    """A payload as the compact JSON text its command gets."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        size = len(text.encode("utf-8"))
    except (ValueError, UnicodeEncodeError):
        message = "field 'payload' must be JSON text of valid Unicode"
        raise JobSpecError(message, "payload") from None
    except RecursionError:
        raise JobSpecError("field 'payload' is nested too deeply", "payload") from None
    if size > MAX_PAYLOAD_BYTES:
        raise JobSpecError(
            f"field 'payload' must be at most {MAX_PAYLOAD_BYTES // 1024} KiB as JSON, "
            f"not {size:,} bytes",
            "payload",
        )
    return text


def job_type_name(value: Any, label: str) -> str:
    """A job type's name: the rule of queue names."""
    if not isinstance(value, str) or _QUEUE_NAME.fullmatch(value) is None:
        shown = printable(str(value), single_line=True)
        raise JobSpecError(f"{label} must be a name of {QUEUE_NAME_RULE}, not {shown!r}", "type")
    return value


def queue_limit_text(text: str) -> int | None:
    """A queue limit as typed: a number of jobs, or 'none' (None). ValueError when it is
    neither; the range (1 to MAX_QUEUE_LIMIT) is the caller's to word."""
    value = text.strip().lower()
    if value == "none":
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > 9:
        raise ValueError(f"not a number of jobs: {text!r}")
    return int(value)


def queue_name(value: Any, field_name: str = "queue", label: str | None = None) -> str:
    """A valid queue name, or JobSpecError naming `field_name` (worded as `label`, by default
    "field 'queue'")."""
    if not isinstance(value, str) or _QUEUE_NAME.fullmatch(value) is None:
        shown = printable(str(value), single_line=True)
        what = label or f"field '{field_name}'"
        raise JobSpecError(
            f"{what} must be a queue name of {QUEUE_NAME_RULE}, not {shown!r}", field_name
        )
    return value


@dataclass(slots=True)
class QueueCounts:
    """Jobs per state plus the number of live workers."""

    by_state: dict[JobState, int] = field(default_factory=dict)
    active_workers: int = 0

    @property
    def total(self) -> int:
        return sum(self.by_state.values())

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {state.value: self.by_state.get(state, 0) for state in STATES}
        data["total"] = self.total
        data["active_workers"] = self.active_workers
        return data


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """One named queue as `queue list` shows it."""

    name: str
    waiting: int  # pending and failed jobs
    running: int
    paused: bool
    max_running: int | None  # None: no limit
    oldest_due_at: int | None  # when its longest-waiting due job became due (epoch ms)
    by_state: dict[JobState, int] = field(default_factory=dict)

    def to_dict(self, now: int) -> dict[str, Any]:
        return {
            "name": self.name,
            "waiting": self.waiting,
            "running": self.running,
            "paused": self.paused,
            "max_running": self.max_running,
            "oldest_waiting_s": (
                None if self.oldest_due_at is None else max(0, now - self.oldest_due_at) / 1000
            ),
            "counts": {state.value: self.by_state.get(state, 0) for state in STATES},
        }


@dataclass(frozen=True, slots=True)
class Action:
    """An operator's action as the audit trail records it: who, from where, on what."""

    face: str  # cli, console, http, api
    actor: str  # the OS user, or the HTTP token's name
    host: str
    action: str  # retry, retry-now, cancel, delete, prune, pause, resume, limit, stop
    subject: str  # the jobs, queue or filter it was given, in words
    # Given jobs by their ids: if it changed none of them it was refused (an unknown id, a
    # finished job to cancel), and leaves no line. A filter that matched nothing does.
    on_named_jobs: bool = False

    def recorded_for(self, touched: int) -> bool:
        """Whether the audit trail gets a line for this action, which changed `touched` rows."""
        return touched > 0 or not self.on_named_jobs


@dataclass(frozen=True, slots=True)
class Operator:
    """Who acts, from where: the audit trail's first columns."""

    face: str  # cli, console, http, api, config
    actor: str
    host: str

    def action(self, name: str, subject: str, on_named_jobs: bool = False) -> Action:
        return Action(self.face, self.actor, self.host, name, subject, on_named_jobs)


def local_operator(face: str) -> Operator:
    """The operator at this machine: its OS user and host name."""
    import getpass  # here: every command imports this module, few of them act
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        user = "unknown"
    return Operator(face, user, socket.gethostname())


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    at: int
    face: str
    actor: str
    host: str
    action: str
    subject: str
    touched: int  # how many jobs (or queues) it changed

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": to_iso(self.at),
            "face": self.face,
            "actor": self.actor,
            "host": self.host,
            "action": self.action,
            "subject": self.subject,
            "touched": self.touched,
        }
