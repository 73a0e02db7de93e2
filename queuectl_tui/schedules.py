"""Periodic schedules, without I/O: what a schedule is, how its input is checked, when its
ticks fall, and which of them a round fires.

A schedule's timing is a five-field cron expression read in its time zone (cronsim, whose
daylight-saving rules are Debian cron's: a time that does not exist on a spring-forward day
fires at the first minute after the gap, a time that happens twice on a fall-back day fires
once), a cron alias (@hourly, @daily, ...) or `@every DURATION`, whose ticks fall on the
multiples of the duration since 1970-01-01T00:00Z. Ticks are epoch milliseconds.

A tick's job is named `NAME@20261206T020000Z` (its tick in compact UTC ISO), which is also
its idempotency key: a unique key per schedule and tick inside the store, so that however
many pools race for a tick, one job is made."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .display import printable
from .errors import InvalidInput
from .models import JobSpec, JobType, masked_environment, parse_job_spec
from .timeutil import to_iso

MAX_NAME_LENGTH = 100
CATCH_UP = ("none", "one", "all")
DEFAULT_CATCH_UP = "one"
DEFAULT_TIMEZONE = "UTC"
# A tick this late or less is on time, not missed: every catch-up policy fires it, so a pool
# that was busy for a moment makes every tick's job. Later ticks follow the policy.
ON_TIME_MS = 5_000
# Ticks fired in one round under catch_up "all"; the next round goes on from there.
MAX_TICKS_PER_ROUND = 1_000
MIN_EVERY_MS = 1_000
MAX_EVERY_MS = 366 * 86_400_000
ORIGINS = ("cli", "console", "http", "api", "config")

# Cron aliases, as Vixie cron spells them.
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000))
_DURATION = re.compile(r"(?:(\d{1,6})d)?(?:(\d{1,6})h)?(?:(\d{1,6})m)?(?:(\d{1,9})s)?")
# The job fields a schedule sets for each of its jobs (its id, run_at and key are the tick's).
JOB_FIELDS = (
    "command",
    "type",
    "payload",
    "queue",
    "priority",
    "timeout",
    "max_retries",
    "cwd",
    "env",
)
FIELDS = ("cron", "every", "timezone", "catch_up", *JOB_FIELDS)


class ScheduleError(InvalidInput):
    """Schedule input that cannot be accepted; the message names the field."""


def schedule_name(value: Any) -> str:
    """A valid schedule name: 1 to 100 printable characters without spaces."""
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= MAX_NAME_LENGTH
        or not value.isprintable()
        or any(char.isspace() for char in value)
    ):
        shown = printable(str(value), single_line=True)
        raise ScheduleError(
            f"a schedule's name must be 1 to {MAX_NAME_LENGTH} printable characters without "
            f"spaces, not {shown!r}",
            "name",
        )
    return value


def parse_every(text: str) -> int:
    """'30s', '5m', '1h30m', '1d' as milliseconds: at least one second, at most 366 days."""
    value = text.strip().lower()
    match = _DURATION.fullmatch(value)
    if not value or match is None:
        raise ScheduleError(
            f"'every' must be a duration such as 30s, 5m, 1h30m or 1d, not {printable(text)!r}",
            "every",
        )
    ms = sum(int(part or 0) * unit for part, (_, unit) in zip(match.groups(), _UNITS, strict=True))
    if not MIN_EVERY_MS <= ms <= MAX_EVERY_MS:
        raise ScheduleError("'every' must be at least 1s and at most 366d", "every")
    return ms


def every_text(ms: int) -> str:
    """Milliseconds as the duration they are: 90000 -> '1m30s'."""
    parts = []
    for name, unit in _UNITS:
        count, ms = divmod(ms, unit)
        if count:
            parts.append(f"{count}{name}")
    return "".join(parts) or "0s"


def _zone(name: Any) -> str:
    if not isinstance(name, str) or not name or len(name) > 100:
        raise ScheduleError("'timezone' must be a time zone name such as Europe/Berlin", "timezone")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        shown = printable(name, single_line=True)
        raise ScheduleError(
            f"unknown time zone {shown!r} (a name such as UTC or Europe/Berlin)", "timezone"
        ) from None
    return name


def _cron(text: Any) -> str:
    """A cron expression or alias, checked and with its spaces made single."""
    if not isinstance(text, str):
        raise ScheduleError("'cron' must be a cron expression such as '0 2 * * *'", "cron")
    value = " ".join(text.split())
    lowered = value.lower()
    if lowered.startswith("@every"):
        try:
            return "@every " + every_text(parse_every(value[len("@every") :]))
        except ScheduleError as error:  # named for where it was written: the cron
            raise ScheduleError(f"'cron' {error}", "cron") from None
    if lowered in ALIASES:
        return lowered
    shown = printable(text, single_line=True)
    if value.startswith("@"):
        known = ", ".join(sorted(ALIASES))
        raise ScheduleError(f"unknown cron alias {shown!r} (known: {known}, @every 5m)", "cron")
    if len(value.split()) != 5:
        raise ScheduleError(
            f"a cron expression has 5 fields (minute hour day-of-month month day-of-week), "
            f"not {shown!r}",
            "cron",
        )
    from cronsim import CronSim, CronSimError

    try:
        CronSim(value, datetime.now(timezone.utc))
    except CronSimError as error:
        raise ScheduleError(f"bad cron expression {shown!r}: {error}", "cron") from None
    return value


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """A schedule's definition: when it ticks and the job each tick makes."""

    timing: str  # '0 2 * * *', '@daily' or '@every 5m', as checked
    timezone: str
    catch_up: str
    job: JobSpec  # the job of every tick: its id, run_at and key are the tick's

    @property
    def every_ms(self) -> int | None:
        if self.timing.startswith("@every "):
            return parse_every(self.timing[len("@every ") :])
        return None

    @property
    def cron(self) -> str | None:
        """The five fields ticks follow (an alias expanded); None for @every."""
        if self.timing.startswith("@every "):
            return None
        return ALIASES.get(self.timing, self.timing)

    def definition(self) -> str:
        """The definition as canonical JSON: stored, and compared to see whether it changed."""
        return json.dumps(
            {
                "timing": self.timing,
                "timezone": self.timezone,
                "catch_up": self.catch_up,
                "job": job_fields(self.job),
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_definition(cls, text: str) -> ScheduleSpec:
        data = json.loads(text)
        job = data["job"]
        spec = JobSpec(
            "",
            job["command"],
            job.get("priority", 0),
            None,
            job.get("max_retries"),
            job.get("timeout"),
            None,
            job.get("queue", "default"),
            job.get("type"),
            None if job.get("payload") is None else _compact(job["payload"]),
            cwd=job.get("cwd"),
            env=None if job.get("env") is None else _compact(job["env"]),
        )
        return cls(data["timing"], data["timezone"], data["catch_up"], spec)

    def describe(self) -> str:
        """The timing in words: 'At 02:00 AM', 'Every 5 minutes'."""
        every = self.every_ms
        if every is not None:
            return "Every " + _every_words(every)
        return _cron_words(self._cron_text())

    def next_tick(self, after: int) -> int | None:
        """The first tick later than `after` (epoch ms); None if it never ticks again."""
        every = self.every_ms
        if every is not None:
            return (after // every + 1) * every
        return _next_cron_tick(self._cron_text(), ZoneInfo(self.timezone), after)

    def _cron_text(self) -> str:
        cron = self.cron
        assert cron is not None
        return cron

    def ticks(self, start: int, end: int, limit: int) -> list[int]:
        """Up to `limit` ticks from `start` to `end`, both included, in order."""
        found: list[int] = []
        tick = self.next_tick(start - 1)
        while tick is not None and tick <= end and len(found) < limit:
            found.append(tick)
            tick = self.next_tick(tick)
        return found

    def latest_tick(self, start: int, end: int) -> int | None:
        """The last tick from `start` to `end` (both included), or None."""
        every = self.every_ms
        if every is not None:
            last = end // every * every
            return last if last >= start else None
        # Back from the end (cheap whatever the gap), then forward to the exact last tick:
        # around a daylight-saving change the way back may land a tick or two early.
        back = _previous_cron_tick(self._cron_text(), ZoneInfo(self.timezone), end)
        latest = back if back is not None and back >= start else None
        cursor = start - 1 if latest is None else latest
        for _ in range(10_000):
            following = self.next_tick(cursor)
            if following is None or following > end:
                break
            latest = cursor = following
        return latest


@functools.lru_cache(maxsize=256)  # the console words every schedule once a second
def _cron_words(cron: str) -> str:
    from cron_descriptor import get_description

    try:
        return str(get_description(cron))
    except Exception:  # an expression it cannot word is still a valid one
        return cron


def _compact(value: Any) -> str:
    """JSON text as the job validator writes it (models._payload, models._env)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _every_words(ms: int) -> str:
    words = []
    for name, unit in (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000)):
        count, ms = divmod(ms, unit)
        if count:
            words.append(f"{count} {name}{'s' if count != 1 else ''}")
    seconds = ms // 1000
    if seconds or not words:
        words.append(f"{seconds} second{'s' if seconds != 1 else ''}")
    return " ".join(words)


def _as_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _next_cron_tick(cron: str, zone: ZoneInfo, after: int) -> int | None:
    from cronsim import CronSim

    start = datetime.fromtimestamp(after / 1000, timezone.utc).astimezone(zone)
    iterator = CronSim(cron, start)
    # cronsim reads fixed times in local wall time; just after a fall-back it can answer the
    # first of the day's two 02:30s although the second has begun: such a tick is passed.
    for _ in range(100):
        try:
            tick = _as_ms(next(iterator))
        except StopIteration:  # no match in fifty years
            return None
        if tick > after:
            return tick
    return None


def _previous_cron_tick(cron: str, zone: ZoneInfo, at_or_before: int) -> int | None:
    from cronsim import CronSim

    # A millisecond past the end: cronsim takes a start with a fraction as its first candidate.
    start = datetime.fromtimestamp((at_or_before + 1) / 1000, timezone.utc).astimezone(zone)
    iterator = CronSim(cron, start, reverse=True)
    for _ in range(100):
        try:
            tick = _as_ms(next(iterator))
        except StopIteration:
            return None
        if tick <= at_or_before:
            return tick
    return None


@dataclass(frozen=True, slots=True)
class Round:
    """What one round does with a due schedule: the ticks whose jobs it makes, whether it
    passes over missed ones (catch_up), and the schedule's next tick after it."""

    fire: list[int]
    skipped: bool
    next_at: int | None


def plan_round(spec: ScheduleSpec, next_at: int, now: int) -> Round:
    """The ticks a round at `now` fires for a schedule whose next tick is `next_at`.

    Ticks at most ON_TIME_MS late are on time and always fire. Older ones were missed (no
    pool ran): `none` passes over them, `one` fires the latest of them when no tick is on
    time, `all` fires each (MAX_TICKS_PER_ROUND a round; the next round goes on)."""
    if next_at > now:
        return Round([], False, next_at)
    if spec.catch_up == "all":
        fire = spec.ticks(next_at, now, MAX_TICKS_PER_ROUND)
        return Round(fire, False, spec.next_tick(fire[-1] if fire else now))
    on_time_from = now - ON_TIME_MS
    fire = spec.ticks(max(next_at, on_time_from), now, MAX_TICKS_PER_ROUND)
    skipped = False
    if next_at < on_time_from:  # next_at is a tick: at least one was missed
        latest_missed = spec.latest_tick(next_at, on_time_from - 1)
        if spec.catch_up == "one" and not fire and latest_missed is not None:
            fire = [latest_missed]
        else:
            skipped = True  # not counted: that could mean walking years of minutes
    return Round(fire, skipped, spec.next_tick(now))


def compact_utc(ms: int, with_ms: bool = False) -> str:
    """20261206T020000Z (or 20261206T020000.123Z): a tick in a job id."""
    text = to_iso(ms) or ""
    compact = text.replace("-", "").replace(":", "")
    return compact if with_ms else compact.split(".", 1)[0] + "Z"


def tick_job_id(name: str, tick: int) -> str:
    return f"{name}@{compact_utc(tick)}"


def run_now_job_id(name: str, now: int) -> str:
    """The id of a job made by `schedule run`: outside the ticks, so never one of theirs, and
    each run its own (two in one millisecond too)."""
    return f"{name}@run-{compact_utc(now, with_ms=True)}-{os.urandom(3).hex()}"


def tick_job(name: str, spec: ScheduleSpec, tick: int) -> JobSpec:
    """The job of one tick: due at the tick, its id its idempotency key."""
    job_id = tick_job_id(name, tick)
    return spec.job._replace(id=job_id, run_at=tick, idempotency_key=job_id)


def job_fields(job: JobSpec) -> dict[str, Any]:
    """The fields a schedule gives its jobs, as JSON values (None left out)."""
    fields: dict[str, Any] = {
        "command": job.command,
        "type": job.job_type,
        "payload": None if job.payload is None else json.loads(job.payload),
        "queue": job.queue,
        "priority": job.priority,
        "timeout": job.timeout,
        "max_retries": job.max_retries,
        "cwd": job.cwd,
        "env": None if job.env is None else json.loads(job.env),
    }
    return {key: value for key, value in fields.items() if value is not None}


def parse_schedule(
    fields: Mapping[str, Any], job_types: Mapping[str, JobType] | None = None
) -> ScheduleSpec:
    """Validate a schedule's definition (the config file's form: cron or every, timezone,
    catch_up, and the job's fields: command, or type and payload, queue, priority, timeout,
    max_retries, cwd, env). ScheduleError names the field; nothing is half accepted."""
    if not isinstance(fields, Mapping):
        raise ScheduleError("a schedule must be an object with 'cron' or 'every' and a command")
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        shown = printable(str(unknown[0]), single_line=True)
        raise ScheduleError(f"unknown field {shown!r} (known: {', '.join(FIELDS)})", unknown[0])
    cron, every = fields.get("cron"), fields.get("every")
    if (cron is None) == (every is None):
        raise ScheduleError("give a schedule either 'cron' or 'every'", "cron")
    if every is not None:
        if not isinstance(every, str):
            raise ScheduleError("'every' must be a duration such as 5m", "every")
        timing = "@every " + every_text(parse_every(every))
    else:
        timing = _cron(cron)
    zone = _zone(fields.get("timezone", DEFAULT_TIMEZONE))
    catch_up = fields.get("catch_up", DEFAULT_CATCH_UP)
    if catch_up not in CATCH_UP:
        raise ScheduleError("'catch_up' must be none, one or all", "catch_up")
    job_input = {key: fields[key] for key in JOB_FIELDS if fields.get(key) is not None}
    try:
        job = parse_job_spec(job_input, job_types)
    except InvalidInput as error:
        raise ScheduleError(str(error), error.field) from None
    spec = ScheduleSpec(timing, zone, catch_up, job._replace(id=""))
    if spec.cron is not None and spec.next_tick(0) is None:
        raise ScheduleError(f"the cron expression {timing!r} never fires", "cron")
    return spec


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule as stored: its definition, its next tick (ms, the store's clock), whether
    it is paused, and its last job."""

    name: str
    origin: str  # who made it: cli, console, http, api, or config (kept in step with it)
    definition: str  # ScheduleSpec.definition()
    next_at: int | None  # None: it never ticks again
    paused: bool
    last_job_id: str | None
    last_fired_at: int | None
    created_at: int
    updated_at: int

    def __post_init__(self) -> None:
        # SQLite gives the flag as 0 or 1; PostgreSQL as a boolean.
        object.__setattr__(self, "paused", bool(self.paused))

    @property
    def spec(self) -> ScheduleSpec:
        return ScheduleSpec.from_definition(self.definition)

    def to_dict(self) -> dict[str, Any]:
        spec = self.spec
        job = job_fields(spec.job)
        if "env" in job:
            job["env"] = masked_environment(job["env"])
        return {
            "name": self.name,
            "schedule": spec.timing,
            "description": spec.describe(),
            "timezone": spec.timezone,
            "catch_up": spec.catch_up,
            "paused": self.paused,
            "next_at": None if self.paused else to_iso(self.next_at),
            "last_job_id": self.last_job_id,
            "last_fired_at": to_iso(self.last_fired_at),
            "origin": self.origin,
            "job": job,
            "created_at": to_iso(self.created_at),
            "updated_at": to_iso(self.updated_at),
        }


def new_schedule(name: str, spec: ScheduleSpec, origin: str, now: int) -> Schedule:
    """A schedule as first stored: its first tick is the next one after now."""
    return Schedule(
        name, origin, spec.definition(), spec.next_tick(now), False, None, None, now, now
    )
