"""An operator's schedules: add, list, show, pause, resume, remove and run now, each one call
that every face makes (CLI, console, HTTP, the Python API), each change recorded in the audit
trail. schedules.py says what a schedule is; the pools' tickers fire them (engine/ticker.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .config import Settings
from .errors import NotFound
from .models import Job, Operator
from .schedules import (
    Schedule,
    new_schedule,
    parse_schedule,
    run_now_job_id,
    schedule_name,
)
from .store import Store
from .timeutil import to_iso


class NoSuchSchedule(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"no schedule named '{name}' (queuectl schedule list shows them)")


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """A schedule as every face shows it: with its last job as that job is now."""

    schedule: Schedule
    last_job: Job | None  # None: it made none yet, or that job is gone (pruned, deleted)

    @property
    def name(self) -> str:
        return self.schedule.name

    def to_dict(self) -> dict[str, Any]:
        job = self.last_job
        last = None
        if job is not None:
            last = {
                "id": job.id,
                "state": job.state.value,
                "exit_code": job.exit_code,
                "finished_at": to_iso(job.finished_at),
                "last_error": job.last_error,
            }
        return self.schedule.to_dict() | {"last_job": last}


def _view(store: Store, schedule: Schedule) -> ScheduleView:
    last = store.get(schedule.last_job_id) if schedule.last_job_id else None
    return ScheduleView(schedule, last)


def _stored(store: Store, name: str) -> Schedule:
    found = store.get_schedule(schedule_name(name))
    if found is None:
        raise NoSuchSchedule(name)
    return found


def add_schedule(
    store: Store, settings: Settings, name: str, fields: Mapping[str, Any], who: Operator
) -> ScheduleView:
    """Add a schedule (the config file's form of fields: cron or every, timezone, catch_up,
    command or type and payload, queue, priority, timeout, max_retries, cwd, env). Its first
    tick is the next one after now. InvalidInput names a bad field; Conflict for a name that
    is taken; nothing is written either way."""
    name = schedule_name(name)
    spec = parse_schedule(fields, settings.job_types)
    schedule = new_schedule(name, spec, who.face, store.now())
    action = who.action("schedule-add", f"{name} {spec.timing} ({spec.timezone})")
    store.add_schedule(schedule, action)
    return ScheduleView(schedule, None)


def list_schedules(store: Store) -> list[ScheduleView]:
    """Every schedule by name, each with its last job."""
    return [_view(store, schedule) for schedule in store.schedules()]


def get_schedule(store: Store, name: str) -> ScheduleView:
    return _view(store, _stored(store, name))


def pause_schedule(store: Store, name: str, who: Operator) -> ScheduleView:
    """No pool fires it until it is resumed (stored: it stays paused across restarts)."""
    name = _stored(store, name).name
    now = store.now()
    if not store.set_schedule_paused(name, True, None, now, who.action("schedule-pause", name)):
        raise NoSuchSchedule(name)
    return get_schedule(store, name)


def resume_schedule(store: Store, name: str, who: Operator) -> ScheduleView:
    """It goes on from its next tick after now: the ticks it was paused for are not made."""
    schedule = _stored(store, name)
    now = store.now()
    next_at = schedule.spec.next_tick(now)
    action = who.action("schedule-resume", schedule.name)
    if not store.set_schedule_paused(schedule.name, False, next_at, now, action):
        raise NoSuchSchedule(name)
    return get_schedule(store, schedule.name)


def remove_schedule(store: Store, name: str, who: Operator) -> Schedule:
    """Remove it (the jobs it made stay). One the config file declares comes back when a
    pool next starts with that file."""
    schedule = _stored(store, name)
    action = who.action("schedule-remove", schedule.name)
    if not store.remove_schedule(schedule.name, store.now(), action):
        raise NoSuchSchedule(name)
    return schedule


def run_schedule(store: Store, settings: Settings, name: str, who: Operator) -> Job:
    """Make one job of the schedule now, outside its ticks (they go on as before); it is the
    schedule's last job from then on."""
    schedule = _stored(store, name)
    now = store.now()
    job_id = run_now_job_id(schedule.name, now)
    spec = schedule.spec.job._replace(id=job_id)
    action = who.action("schedule-run", f"{schedule.name} as {job_id}")
    made = store.run_schedule(schedule.name, spec, settings.max_retries, now, action)
    if made is None:
        raise NoSuchSchedule(name)
    return made
