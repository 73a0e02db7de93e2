"""Schedules inside a transaction, for every backend: the backend gives its connection, its
named statements (sql/schedules.sql), its insert of one job and its audit line.

Firing a tick is one transaction: the compare-and-set that moves the schedule's next tick on
(`advance_schedule`, which only the transaction still seeing that tick as the next one gets
past) and the insert of the tick's jobs through the backend's own insert, which keeps the
per-queue counters and finds a tick whose job exists already by its idempotency key."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..models import Action, Job, JobSpec
from ..schedules import Schedule
from .base import DuplicateJobError, DuplicateScheduleError, EnqueueResult, ScheduleSync
from .rows import Connection, RowMap

SCHEDULES = RowMap(Schedule)
Insert = Callable[[JobSpec], EnqueueResult]
Record = Callable[[Action | None, int], None]  # an audit line: the action, what it touched


def values(schedule: Schedule) -> dict[str, object]:
    """A schedule's row: the parameters of insert_schedule."""
    return {
        "name": schedule.name,
        "origin": schedule.origin,
        "definition": schedule.definition,
        "next_at": schedule.next_at,
        "paused": bool(schedule.paused),
        "last_job_id": schedule.last_job_id,
        "last_fired_at": schedule.last_fired_at,
        "created_at": schedule.created_at,
        "updated_at": schedule.updated_at,
    }


def add(
    conn: Connection,
    sql: Mapping[str, str],
    schedule: Schedule,
    action: Action | None,
    record: Record,
) -> None:
    """Store a new schedule; DuplicateScheduleError if its name is taken (nothing changed)."""
    if conn.execute(sql["insert_schedule"], values(schedule)).rowcount != 1:
        raise DuplicateScheduleError(schedule.name)
    record(action, 1)


def fire(
    conn: Connection,
    sql: Mapping[str, str],
    insert: Insert,
    name: str,
    expected: int,
    next_at: int | None,
    specs: Sequence[JobSpec],
    now: int,
) -> list[Job] | None:
    """Move the schedule from its tick `expected` on to `next_at` and make the ticks' jobs;
    None (and nothing done) when the schedule's next tick is no longer `expected`: another
    pool fired it, or it was paused, changed or removed."""
    params = {
        "next_at": next_at,
        "job_id": specs[-1].id if specs else None,
        "fired_at": now if specs else None,
        "now": now,
        "name": name,
        "expected": expected,
    }
    if conn.execute(sql["advance_schedule"], params).rowcount != 1:
        return None
    return [made.job for made in (_insert(insert, spec) for spec in specs) if made and made.created]


def _insert(insert: Insert, spec: JobSpec) -> EnqueueResult | None:
    try:
        return insert(spec)
    except DuplicateJobError:  # a job of another making holds the tick's id: left alone
        return None


def run_now(
    conn: Connection,
    sql: Mapping[str, str],
    insert: Insert,
    name: str,
    spec: JobSpec,
    now: int,
    action: Action | None,
    record: Record,
) -> Job | None:
    """One job of the schedule now, outside its ticks (its next tick stays); None if there
    is no such schedule."""
    params = {"job_id": spec.id, "fired_at": now, "now": now, "name": name}
    if conn.execute(sql["schedule_ran"], params).rowcount != 1:
        return None
    made = insert(spec)
    record(action, 1 if made.created else 0)
    return made.job


def sync(
    conn: Connection,
    sql: Mapping[str, str],
    declared: Sequence[Schedule],
    action: Action | None,
    record: Record,
) -> ScheduleSync:
    """Bring the schedules of origin `config` in step with `declared` (each with the next tick
    it starts from): new ones added, changed ones redefined from that tick, those no longer
    declared removed; an unchanged one keeps its next tick. A name another origin holds is
    left alone (and reported)."""
    stored = {row.name: row for row in SCHEDULES.all(conn, sql["schedules"])}
    done = ScheduleSync()
    for schedule in declared:
        found = stored.get(schedule.name)
        if found is None:
            conn.execute(sql["insert_schedule"], values(schedule))
            done.added.append(schedule.name)
        elif found.origin != schedule.origin:
            done.conflicts.append(schedule.name)
        elif found.definition != schedule.definition:
            params = {
                "definition": schedule.definition,
                "next_at": schedule.next_at,
                "now": schedule.updated_at,
                "name": schedule.name,
            }
            conn.execute(sql["redefine_schedule"], params)
            done.changed.append(schedule.name)
    names = {schedule.name for schedule in declared}
    origins = {schedule.origin for schedule in declared} or {"config"}
    for row in stored.values():
        if row.origin in origins and row.name not in names:
            conn.execute(sql["delete_schedule"], {"name": row.name})
            done.removed.append(row.name)
    record(action, len(done.added) + len(done.changed) + len(done.removed))
    return done
