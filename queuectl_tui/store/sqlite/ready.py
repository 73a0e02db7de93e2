"""Where a queue's due jobs are, read from the ready index a priority level at a time.

The index orders each queue's waiting jobs by priority, then run_at. Jobs scheduled for later
can sit ahead of due ones of a lower priority, so a plain "first due job" search would walk
every one of them; these reads seek to each level instead (see waiting_levels)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from .statements import SQL


@dataclass(frozen=True, slots=True)
class Level:
    """One priority level of a queue's waiting jobs."""

    priority: int
    earliest: int  # the earliest run_at of the level
    next_after: int | None  # the earliest run_at after the time asked about


# Levels read a seek at a time; a queue of more (jobs of many distinct priorities) is read by
# a scan instead, which then costs less than the seeks would.
MAX_LEVELS = 32


def levels(conn: sqlite3.Connection, queue: str, now: int) -> list[Level] | None:
    """The queue's levels, highest priority first; None when it has more than MAX_LEVELS."""
    found = [
        Level(*row)
        for row in conn.execute(
            SQL["waiting_levels"], {"queue": queue, "now": now, "most": MAX_LEVELS + 1}
        )
    ]
    if len(found) > MAX_LEVELS:
        return None
    return sorted(found, key=lambda level: -level.priority)


def best_due(conn: sqlite3.Connection, queue: str, now: int) -> tuple[int, int, int] | None:
    """The (priority, run_at, seq) of the job a claim would take from the queue, if any is due."""
    first = conn.execute(SQL["first_waiting"], {"queue": queue}).fetchone()
    if first is None:
        return None
    if first[1] <= now:
        return (first[0], first[1], first[2])
    found = levels(conn, queue, now)
    if found is None:
        row = conn.execute(SQL["best_due_scan"], {"queue": queue, "now": now}).fetchone()
        return None if row is None else (row[0], row[1], row[2])
    for level in found:
        if level.earliest <= now:
            row = conn.execute(
                SQL["first_of_level"], {"queue": queue, "priority": level.priority}
            ).fetchone()
            return (row[0], row[1], row[2])
    return None


def _earliest(conn: sqlite3.Connection, queue: str, after: int) -> tuple[int | None, int | None]:
    """The queue's earliest run_at, and its earliest after `after`."""
    found = levels(conn, queue, after)
    if found is None:
        earliest, next_after = conn.execute(
            SQL["earliest_scan"], {"queue": queue, "after": after}
        ).fetchone()
        return earliest, next_after
    later = [level.next_after for level in found if level.next_after is not None]
    return min((level.earliest for level in found), default=None), min(later, default=None)


def oldest_due(conn: sqlite3.Connection, queue: str, now: int) -> int | None:
    """When the queue's longest-waiting due job became due."""
    earliest, _ = _earliest(conn, queue, now)
    return earliest if earliest is not None and earliest <= now else None


def next_run_at(conn: sqlite3.Connection, after: int) -> int | None:
    """The earliest run_at after `after` of any waiting job."""
    times = [
        next_after
        for (queue,) in conn.execute(SQL["waiting_queues"]).fetchall()
        if (next_after := _earliest(conn, queue, after)[1]) is not None
    ]
    return min(times, default=None)
