"""Settings: built-in defaults < config file < environment < command-line flags.

The config file is JSON with snake_case keys (`max_retries`); the CLI names the same settings
with hyphens (`max-retries`). `config set` validates and rewrites the file atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import ConfigurationError, InvalidInput
from .files import DEFAULT_FILE_MODE, create_exclusive
from .lifecycle import RetryPolicy
from .location import normalise, scheme
from .models import (
    MAX_QUEUE_LIMIT,
    JobType,
    job_type_name,
    parse_job_spec,
    queue_limit_text,
    queue_name,
)
from .schedules import ScheduleSpec, parse_schedule, schedule_name

DEFAULT_CONFIG_FILE = "config.json"
ENV_DB = "QUEUECTL_DB"
ENV_CONFIG = "QUEUECTL_CONFIG"
ENV_READ_TOKEN = "QUEUECTL_READ_TOKEN"
ENV_WRITE_TOKEN = "QUEUECTL_WRITE_TOKEN"
# Keys of config.json that hold objects rather than one value; read by their own parsers.
JOB_TYPES_KEY = "job_types"
TOKENS_KEY = "http_tokens"
SCHEDULES_KEY = "schedules"
HUNG_POOL_FACTOR = 4  # the default hung-pool-timeout, in stale-worker-timeouts

# When a changed setting reaches what already runs: `config set` says it, `config list` shows
# whether it is live. A running pool re-reads the live ones (see engine/live_settings.py).
NEXT_RUN = "running pools use it from their next run"
NEXT_FAILURE = "running pools use it from their next failure"
POOL_RESTART = "running pools apply it after a restart"
ALL_RESTART = "new commands use it; running pools, servers and consoles after a restart"
SERVER_RESTART = "a running `queuectl serve` applies it after a restart"
AT_ENQUEUE = "jobs get it as they are enqueued; running servers and consoles after a restart"
NEXT_START = "the next `worker start` without --count uses it"
LIVE_WHEN = {NEXT_RUN: "next run", NEXT_FAILURE: "next failure"}


class ConfigError(ConfigurationError):
    """A setting or config file that cannot be used; the message says which and why."""


@dataclass(frozen=True, slots=True)
class SettingSpec:
    """How one setting is named, checked and explained; its default is the `Settings` field."""

    key: str  # snake_case, as in the file
    kind: type  # int, float or str
    minimum: float | None
    maximum: float | None
    help: str
    choices: tuple[int, ...] = ()  # when set, the only values allowed
    check: Callable[[str], object] | None = None  # a text setting's own rule (raises ConfigError)
    applies: str = POOL_RESTART  # when a change reaches what already runs
    values: tuple[str, ...] = ()  # a text setting's only values, for its messages and docs

    @property
    def cli_name(self) -> str:
        return self.key.replace("_", "-")

    @property
    def live(self) -> str | None:
        """'next run' or 'next failure' if running pools apply a change, else None."""
        return LIVE_WHEN.get(self.applies)


# Who may reach `queuectl serve`: its tokens (config.json's `http_tokens`, the environment, or
# the token a server generates for itself) and the host names it answers for off loopback.
MIN_TOKEN_LENGTH = 32
ANY_HOST = "*"
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?")


@dataclass(frozen=True, slots=True)
class ApiToken:
    """A bearer token of the HTTP face: its name (the audit trail's actor) and its access."""

    name: str
    secret: str
    write: bool  # write tokens also read
    origin: str = ""  # where it is set, for messages: 'http_tokens.ci', QUEUECTL_WRITE_TOKEN

    def weakness(self) -> str:
        """Why the token is too easy to guess, in one sentence that never shows it ('' if not)."""
        where = self.origin or f"the token '{self.name}'"
        if len(self.secret) < MIN_TOKEN_LENGTH:
            problem = f"is shorter than {MIN_TOKEN_LENGTH} characters"
        elif len(set(self.secret)) == 1:
            problem = "is one character repeated"
        else:
            return ""
        return (
            f"the HTTP token {where} {problem}; make one with "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )


def parse_hosts(text: str) -> frozenset[str] | None:
    """http_hosts 'queue.example.com, 10.0.0.5' as a set of lower-case names; None for '*'
    (any host: a server behind a proxy that checks it). ConfigError names a bad entry."""
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    if names == [ANY_HOST]:
        return None
    for name in names:
        try:
            ipaddress.ip_address(name)
        except ValueError:
            if len(name) > 253 or not _HOST_NAME.fullmatch(name):
                raise ConfigError(
                    f"http-hosts: {name!r} is not a host name or an address (or give * alone)"
                ) from None
    if not names:
        raise ConfigError("http-hosts must name at least one host (or * for any)")
    return frozenset(name.rstrip(".") for name in names)


ACCESS_SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec(
        "http_hosts",
        str,
        None,
        None,
        "host names a `queuectl serve` off loopback answers for, as NAME,NAME (others get "
        "421, against DNS rebinding); default: the address it listens on and this machine's "
        "name and FQDN; * for any",
        check=lambda text: parse_hosts(text),
        applies=SERVER_RESTART,
    ),
)

OUTPUT_STREAMS = ("separate", "merged")
ON_OFF = ("on", "off")

SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec(
        "database",
        str,
        None,
        None,
        "the queue: a SQLite file, a sqlite:///relative.db or sqlite:////absolute.db URL, or "
        "a postgresql:// URL (relative paths: to the config file)",
        applies=ALL_RESTART,
        check=lambda text: _location(text),
    ),
    SettingSpec(
        "max_retries",
        int,
        0,
        100,
        "retries after the first attempt, for jobs enqueued from now on",
        applies=AT_ENQUEUE,
    ),
    SettingSpec(
        "backoff_base",
        float,
        1.0,
        60.0,
        "retry n waits backoff_base**n seconds",
        applies=NEXT_FAILURE,
    ),
    SettingSpec(
        "max_backoff",
        float,
        1.0,
        30 * 86400.0,
        "upper bound in seconds on one retry delay",
        applies=NEXT_FAILURE,
    ),
    SettingSpec(
        "job_timeout",
        float,
        0.001,
        7 * 86400.0,
        "seconds a job may run when it sets no timeout of its own (a run keeps the timeout "
        "it started with)",
        applies=NEXT_RUN,
    ),
    SettingSpec(
        "stale_worker_timeout",
        float,
        1.0,
        86400.0,
        "seconds without a heartbeat before a worker counts as lost",
        applies=ALL_RESTART,
    ),
    SettingSpec(
        "heartbeat_interval",
        float,
        0.1,
        3600.0,
        "seconds between worker heartbeats (keep well below stale-worker-timeout)",
    ),
    SettingSpec(
        "hung_pool_timeout",
        float,
        0.0,
        30 * 86400.0,
        "seconds a pool on this host may be alive but silent before another pool kills it and "
        "recovers its jobs (0: four times stale-worker-timeout)",
    ),
    SettingSpec(
        "default_workers",
        int,
        1,
        256,
        "workers a pool starts when --count is not given",
        applies=NEXT_START,
    ),
    SettingSpec(
        "output_limit",
        int,
        0,
        64 * 1024 * 1024,
        "bytes of output kept per attempt (the tail is kept)",
        applies=NEXT_RUN,
    ),
    SettingSpec(
        "output_streams",
        str,
        None,
        None,
        "'separate': stdout and stderr on pipes of their own, told apart in live output (lines "
        "both print within one moment may be stored in either order); 'merged': one pipe, "
        "their exact order kept, all shown as stdout",
        check=lambda text: _one_of(text, "output-streams", OUTPUT_STREAMS),
        values=OUTPUT_STREAMS,
        applies=NEXT_RUN,
    ),
    SettingSpec(
        "kill_grace",
        float,
        0.0,
        300.0,
        "seconds between TERM and KILL when a job's process group is stopped",
        applies=NEXT_RUN,
    ),
    SettingSpec(
        "file_mode",
        int,
        None,
        None,
        "permissions of the files queuectl creates (database, its -wal/-shm/-lock, workers log, "
        "config): 600 owner only, 660 shared with the group",
        choices=(600, 660),
        applies=ALL_RESTART,
    ),
    SettingSpec(
        "keep_completed_days",
        float,
        0.0,
        36500.0,
        "days a running pool keeps completed jobs before removing them (0: keep them all)",
    ),
    SettingSpec(
        "keep_cancelled_days",
        float,
        0.0,
        36500.0,
        "days a running pool keeps cancelled jobs before removing them (0: keep them all)",
    ),
    SettingSpec(
        "queue_limits",
        str,
        None,
        None,
        "limits on running jobs per queue, as NAME=N,NAME=N; each pool sets them as it starts "
        "(the same as `queue limit NAME N`)",
        check=lambda text: parse_queue_limits(text),
    ),
    SettingSpec(
        "keep_dead_days",
        float,
        0.0,
        36500.0,
        "days a running pool keeps dead jobs before removing them (0: keep them all)",
    ),
    SettingSpec(
        "keep_workers_days",
        float,
        0.0,
        36500.0,
        "days a running pool keeps the rows of stopped and lost workers before forgetting them "
        "(0: keep them all)",
    ),
    SettingSpec(
        "max_queue_depth",
        int,
        0,
        10**12,
        "jobs waiting to run (pending and failed) beyond which HTTP submissions get 429 "
        "(0: no limit)",
        applies=SERVER_RESTART,
    ),
    *ACCESS_SETTINGS,
    SettingSpec(
        "http_access_log",
        str,
        None,
        None,
        "'on': `queuectl serve` logs a line per request on stderr (client, method, path, "
        "status, time); 'off': only failed sign-ins and errors",
        check=lambda text: _one_of(text, "http-access-log", ON_OFF),
        values=ON_OFF,
        applies=SERVER_RESTART,
    ),
    SettingSpec(
        "http_max_queues",
        int,
        1,
        100_000,
        "queues beyond which an HTTP submission may not create another (one naming an "
        "existing queue is taken); each queue is a few series in /metrics",
        applies=SERVER_RESTART,
    ),
    SettingSpec(
        "http_body_limit",
        int,
        1024,
        64 * 1024 * 1024,
        "bytes of an HTTP request body beyond which it gets 413",
        applies=SERVER_RESTART,
    ),
    # What one HTTP client may hold of the server (see http/transport.py).
    SettingSpec(
        "http_header_limit",
        int,
        1024,
        1024 * 1024,
        "bytes of an HTTP request line and headers beyond which it gets 431 and is closed",
        applies=SERVER_RESTART,
    ),
    SettingSpec(
        "http_header_count",
        int,
        8,
        1000,
        "headers of an HTTP request beyond which it gets 431 and is closed",
        applies=SERVER_RESTART,
    ),
    SettingSpec(
        "http_header_timeout",
        float,
        0.1,
        3600.0,
        "seconds an HTTP request line and headers may take to arrive, in all, before the "
        "connection is closed",
        applies=SERVER_RESTART,
    ),
    SettingSpec(
        "http_body_timeout",
        float,
        0.1,
        3600.0,
        "seconds an HTTP request body may take to arrive, in all, before the connection is closed",
        applies=SERVER_RESTART,
    ),
    SettingSpec(
        "http_idle_timeout",
        float,
        0.1,
        3600.0,
        "seconds an HTTP connection may stay silent between requests (or before its first), "
        "or leave an answer unread, before it is closed",
        applies=SERVER_RESTART,
    ),
    SettingSpec(
        "http_max_connections",
        int,
        2,
        100_000,
        "open HTTP connections in all; past it the longest-idle one is closed for a new one, "
        "or the new one when all are busy",
        applies=SERVER_RESTART,
    ),
    SettingSpec(
        "http_max_client_connections",
        int,
        1,
        100_000,
        "open HTTP connections from one client address (all local clients share 127.0.0.1); "
        "past it as for http-max-connections",
        applies=SERVER_RESTART,
    ),
    SettingSpec(
        "http_read_concurrency",
        int,
        1,
        1000,
        "expensive HTTP reads answered at once (GET /jobs, /stats, /metrics, the dashboard); "
        "one more waits up to 2 s, then gets 503 with Retry-After",
        applies=SERVER_RESTART,
    ),
)
SETTINGS_BY_KEY: dict[str, SettingSpec] = {spec.key: spec for spec in SETTINGS}
# The settings a running pool takes from a changed config file.
LIVE_KEYS: tuple[str, ...] = tuple(spec.key for spec in SETTINGS if spec.live)

# Names used by the QueueCTL reference's config.json, read as ours.
ALIASES: dict[str, str] = {
    "database_path": "database",  # its name before URLs were accepted
    "default_retries": "max_retries",
    "stale_worker_timeout_seconds": "stale_worker_timeout",
}


@dataclass(frozen=True, slots=True)
class Settings:
    database: str = "queue.db"
    max_retries: int = 3
    backoff_base: float = 2.0
    max_backoff: float = 3600.0
    job_timeout: float = 300.0
    stale_worker_timeout: float = 15.0
    heartbeat_interval: float = 2.0
    hung_pool_timeout: float = 0.0  # 0: HUNG_POOL_FACTOR x stale_worker_timeout
    default_workers: int = 1
    output_limit: int = 65536
    output_streams: str = "separate"
    kill_grace: float = 2.0
    file_mode: int = 600
    keep_completed_days: float = 7.0
    keep_cancelled_days: float = 7.0
    keep_dead_days: float = 0.0
    keep_workers_days: float = 7.0
    queue_limits: str = ""  # "reports=2,emails=5": set by each pool as it starts
    max_queue_depth: int = 0  # 0: no admission limit
    http_max_queues: int = 100
    http_hosts: str = ""  # "": the listening address, this machine's name and FQDN
    http_access_log: str = "on"
    http_body_limit: int = 1024 * 1024
    http_header_limit: int = 64 * 1024
    http_header_count: int = 100
    http_header_timeout: float = 10.0
    http_body_timeout: float = 30.0
    http_idle_timeout: float = 15.0
    http_max_connections: int = 1000
    http_max_client_connections: int = 100
    http_read_concurrency: int = 4
    # From config.json's objects (not `config set`): typed jobs and the HTTP tokens.
    job_types: Mapping[str, JobType] = field(default_factory=dict)
    tokens: tuple[ApiToken, ...] = ()
    # The file's schedules, which pools keep in step with the store as they start; None when
    # the file has no "schedules" key (then pools leave the stored ones alone).
    schedules: Mapping[str, ScheduleSpec] | None = None
    # Where the settings came from; not settings themselves.
    config_file: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {spec.key: getattr(self, spec.key) for spec in SETTINGS}

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.backoff_base, self.max_backoff)

    @property
    def file_permissions(self) -> int:
        """file_mode as permission bits: 600 is 0o600."""
        return int(str(self.file_mode), 8)

    @property
    def hung_after_s(self) -> float:
        """When a live but silent pool on this host counts as hung."""
        return self.hung_pool_timeout or HUNG_POOL_FACTOR * self.stale_worker_timeout


def setting_spec(name: str) -> SettingSpec:
    """Look a setting up by its CLI name (`max-retries`) or file key (`max_retries`)."""
    key = name.strip().replace("-", "_")
    key = ALIASES.get(key, key)
    spec = SETTINGS_BY_KEY.get(key)
    if spec is None:
        valid = ", ".join(s.cli_name for s in SETTINGS)
        raise ConfigError(f"unknown setting '{name}'; valid settings: {valid}")
    return spec


def _location(text: str) -> str:
    """A database setting checked as it is set or read (ConfigError says what is wrong)."""
    try:
        return normalise(text)
    except ConfigurationError as error:
        raise ConfigError(str(error)) from None


def _one_of(text: str, name: str, choices: tuple[str, ...]) -> str:
    if text not in choices:
        raise ConfigError(f"{name} must be " + " or ".join(repr(c) for c in choices))
    return text


def parse_queue_limits(text: str) -> dict[str, int]:
    """'reports=2, emails=5' as {'reports': 2, 'emails': 5}; ConfigError names what is wrong."""
    limits: dict[str, int] = {}
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        name, _, count = part.partition("=")
        name, count = name.strip(), count.strip()
        try:
            queue_name(name, "queue_limits", f"queue-limits: {name!r}")
        except InvalidInput as error:
            raise ConfigError(str(error)) from None
        try:
            limit = queue_limit_text(count)
        except ValueError:
            limit = None
        if limit is None or not 1 <= limit <= MAX_QUEUE_LIMIT:
            raise ConfigError(
                f"queue-limits: the limit of {name!r} must be 1 to {MAX_QUEUE_LIMIT:,}, "
                f"not {count!r}"
            )
        limits[name] = limit
    return limits


def coerce(spec: SettingSpec, value: Any) -> Any:
    """Check one value (a JSON value or command-line text) against its setting."""
    if spec.kind is str:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{spec.cli_name} must be a non-empty string")
        if spec.check is not None:
            spec.check(value)  # refused here, not when the setting is used
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text) if spec.kind is int else float(text)
        except ValueError:
            kind = "an integer" if spec.kind is int else "a number"
            raise ConfigError(f"{spec.cli_name} must be {kind}, not {text!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{spec.cli_name} must be a number")
    if spec.kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"{spec.cli_name} must be an integer")
        value = int(value)
    else:
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{spec.cli_name} must be a finite number")
    if spec.choices and value not in spec.choices:
        allowed = " or ".join(str(choice) for choice in spec.choices)
        raise ConfigError(f"{spec.cli_name} must be {allowed}")
    if spec.minimum is not None and value < spec.minimum:
        raise ConfigError(f"{spec.cli_name} must be at least {_num(spec.minimum)}")
    if spec.maximum is not None and value > spec.maximum:
        raise ConfigError(f"{spec.cli_name} must be at most {_num(spec.maximum)}")
    return value


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def resolve_config_path(explicit: str | None, env: Mapping[str, str]) -> tuple[Path, bool]:
    """The config file to read and write, and whether it was named explicitly."""
    if explicit:
        return Path(explicit).expanduser(), True
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]).expanduser(), True
    return Path(DEFAULT_CONFIG_FILE), False


def read_config_file(path: Path) -> dict[str, Any]:
    """The validated settings stored in one file (only the keys it sets)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"config file {path} is not valid JSON: {error}") from None
    except RecursionError:
        raise ConfigError(f"config file {path} is not valid JSON: nested too deeply") from None
    except ValueError:  # Python converts no integer of more than 4300 digits
        raise ConfigError(f"config file {path} holds a number with too many digits") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path} must hold a JSON object")
    values: dict[str, Any] = {}
    for name, value in raw.items():
        try:
            if name == JOB_TYPES_KEY:
                values[name] = parse_job_types(value)
            elif name == SCHEDULES_KEY:
                continue  # below, once the job types a schedule may name are known
            elif name == TOKENS_KEY:
                values["tokens"] = parse_tokens(value)
            else:
                spec = setting_spec(str(name))
                values[spec.key] = coerce(spec, value)
        except ConfigError as error:
            raise ConfigError(f"config file {path}: {error}") from None
    if SCHEDULES_KEY in raw:
        try:
            values[SCHEDULES_KEY] = parse_schedules(raw[SCHEDULES_KEY], values.get(JOB_TYPES_KEY))
        except ConfigError as error:
            raise ConfigError(f"config file {path}: {error}") from None
    return values


def parse_schedules(
    raw: Any, job_types: Mapping[str, JobType] | None = None
) -> dict[str, ScheduleSpec]:
    """config.json's `schedules`: {"nightly": {"cron": "0 2 * * *", "command": "..."}, ...}."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{SCHEDULES_KEY} must be an object of schedule name to its definition")
    found: dict[str, ScheduleSpec] = {}
    for name, fields in raw.items():
        where = f"{SCHEDULES_KEY}.{name}"
        try:
            found[schedule_name(name)] = parse_schedule(fields, job_types)
        except InvalidInput as error:
            raise ConfigError(f"{where}: {error}") from None
    return found


def parse_job_types(raw: Any) -> dict[str, JobType]:
    """config.json's `job_types`: {"email": {"command": "...", "max_retries": 3, ...}}."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{JOB_TYPES_KEY} must be an object of type name to its settings")
    types: dict[str, JobType] = {}
    allowed = {
        "command",
        "max_retries",
        "timeout",
        "priority",
        "queue",
        "queues",
        "max_queue_depth",
    }
    for name, fields in raw.items():
        where = f"{JOB_TYPES_KEY}.{name}"
        try:
            job_type_name(name, f"{JOB_TYPES_KEY}: {name!r}")
            if not isinstance(fields, dict):
                raise ConfigError(f"{where} must be an object with a 'command'")
            unknown = sorted(set(fields) - allowed)
            if unknown:
                known = ", ".join(sorted(allowed))
                raise ConfigError(f"{where}: unknown field {unknown[0]!r} (known: {known})")
            depth = fields.get("max_queue_depth")
            if depth is not None and (
                isinstance(depth, bool) or not isinstance(depth, int) or depth < 1
            ):
                raise ConfigError(f"{where}.max_queue_depth must be a whole number above 0")
            queues = _other_queues(fields.get("queues", []), where)
            # The same rules as a job's own fields, so a type never makes a job they refuse.
            own = {key: fields[key] for key in fields if key not in ("max_queue_depth", "queues")}
            spec = parse_job_spec(own)
        except InvalidInput as error:
            raise ConfigError(f"{where}: {error}") from None
        types[name] = JobType(
            name,
            spec.command,
            spec.max_retries,
            spec.timeout,
            spec.priority,
            spec.queue,
            depth,
            queues,
        )
    return types


def _other_queues(raw: Any, where: str) -> tuple[str, ...]:
    """A job type's `queues`: the queues besides its own that its jobs may name."""
    if not isinstance(raw, list):
        raise ConfigError(f"{where}.queues must be a list of queue names")
    return tuple(queue_name(value, "queues", "each of its queues") for value in raw)


def parse_tokens(raw: Any) -> tuple[ApiToken, ...]:
    """config.json's `http_tokens`: {"ci": {"token": "...", "access": "write"}, ...}."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{TOKENS_KEY} must be an object of token name to its token and access")
    tokens = []
    for name, fields in raw.items():
        where = f"{TOKENS_KEY}.{name}"
        if not isinstance(fields, dict) or set(fields) - {"token", "access"}:
            raise ConfigError(f"{where} must be an object with 'token' and 'access'")
        secret, access = fields.get("token"), fields.get("access", "read")
        if not isinstance(secret, str) or not _token_text(secret):
            raise ConfigError(f"{where}.token must be printable ASCII without spaces")
        if access not in ("read", "write"):
            raise ConfigError(f"{where}.access must be 'read' or 'write'")
        # Its strength is checked as a server starts (ApiToken.weakness): other commands
        # never send it, and must not fail on it.
        tokens.append(ApiToken(str(name), secret, access == "write", where))
    return tuple(tokens)


def environment_tokens(env: Mapping[str, str]) -> tuple[ApiToken, ...]:
    """Tokens given in the environment, named after their variable."""
    found = []
    for variable, write in ((ENV_READ_TOKEN, False), (ENV_WRITE_TOKEN, True)):
        secret = env.get(variable)
        if secret:
            if not _token_text(secret):
                raise ConfigError(f"{variable} must be printable ASCII without spaces")
            found.append(ApiToken(variable.lower(), secret, write, variable))
    return tuple(found)


def _token_text(secret: str) -> bool:
    """What an Authorization header can carry unchanged: printable ASCII, no space."""
    return bool(secret) and all("!" <= char <= "~" for char in secret)


def load_settings(
    config_path: str | None = None,
    db_path: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Defaults, then the config file, then QUEUECTL_DB, then the --db flag."""
    env = os.environ if env is None else env
    path, explicit = resolve_config_path(config_path, env)
    values: dict[str, Any] = {}
    config_file: str | None = None
    if explicit or path.is_file():
        values = read_config_file(path)
        config_file = str(path)
        database = values.get("database")
        if database is not None:
            database = normalise(database)
            if scheme(database) is None and not Path(database).is_absolute():
                database = str(path.parent / database)  # relative to the config file
            values["database"] = database
    values["tokens"] = values.get("tokens", ()) + environment_tokens(env)
    settings = replace(Settings(), config_file=config_file, **values)
    override = db_path or env.get(ENV_DB)
    if override:
        settings = replace(settings, database=normalise(override))
    _check_intervals(settings)
    return settings


@dataclass(frozen=True, slots=True)
class SettingsSource:
    """How a process loaded its settings, so that it can load them again later: the same
    flags and the environment as it was then, so that whatever they set keeps winning over
    the file. `file` is the config file that `config set` writes for it, as an absolute path,
    whether or not it exists yet."""

    config_path: str | None
    db_path: str | None
    env: Mapping[str, str]
    file: Path

    @classmethod
    def capture(
        cls,
        config_path: str | None = None,
        db_path: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SettingsSource:
        env = dict(os.environ if env is None else env)
        path, _ = resolve_config_path(config_path, env)
        return cls(config_path, db_path, env, path.absolute())

    def load(self) -> Settings:
        return load_settings(self.config_path, self.db_path, self.env)


def _check_intervals(settings: Settings) -> None:
    if settings.heartbeat_interval >= settings.stale_worker_timeout:
        raise ConfigError(
            "heartbeat-interval must be shorter than stale-worker-timeout "
            f"({_num(settings.heartbeat_interval)} >= {_num(settings.stale_worker_timeout)})"
        )
    if 0 < settings.hung_pool_timeout < settings.stale_worker_timeout:
        raise ConfigError(
            "hung-pool-timeout must be 0 or at least stale-worker-timeout "
            f"({_num(settings.hung_pool_timeout)} < {_num(settings.stale_worker_timeout)})"
        )


def write_setting(path: Path, name: str, value: str) -> tuple[SettingSpec, Any]:
    """Validate and store one setting in the config file, atomically; returns what was set.

    The read-modify-write holds an exclusive lock on a sibling lock file, so that concurrent
    writers of different settings all keep theirs."""
    spec = setting_spec(name)
    coerced = coerce(spec, value)
    with _config_lock(path):
        current: dict[str, Any] = {}  # the file as written, old names included
        values: dict[str, Any] = {}  # what it sets, validated
        mode: int | None = None  # a file that exists keeps its permissions
        if path.exists():
            values = read_config_file(path)  # also refuses to rewrite a broken file
            current = json.loads(path.read_text(encoding="utf-8"))
            mode = stat.S_IMODE(path.stat().st_mode)
            for alias, key in ALIASES.items():
                if alias in current and key == spec.key:
                    del current[alias]
        current[spec.key] = values[spec.key] = coerced
        settings = replace(Settings(), **values)
        _check_intervals(settings)
        text = json.dumps(current, indent=2) + "\n"
        _write_atomically(path, text, settings.file_permissions if mode is None else mode)
    return spec, coerced


@contextlib.contextmanager
def _config_lock(path: Path) -> Iterator[None]:
    lock_path = path.with_name(f".{path.name}.lock")  # kept: removing it would race
    try:
        # 0600 whatever the config's mode: anyone who can open the lock can hold it, and so
        # stop every `config set` (a config shared read-only, 0644, must not share that).
        create_exclusive(lock_path, DEFAULT_FILE_MODE)
        # O_NONBLOCK: a FIFO planted there must not block the open; it is refused below.
        fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as error:
        raise ConfigError(f"cannot lock config file {path}: {error.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"cannot lock config file {path}: {lock_path} is not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _write_atomically(path: Path, text: str, mode: int) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    try:
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as error:
        raise ConfigError(f"cannot write config file {path}: {error}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), mode)
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
