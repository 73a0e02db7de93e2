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


def levels(conn: sqlite3.Connection, queue: str, now: int) -> list[Level]:
    """The queue's levels, highest priority first."""
    found = [Level(*row) for row in conn.execute(SQL["waiting_levels"], (queue, now))]
    return sorted(found, key=lambda level: -level.priority)


def best_due(conn: sqlite3.Connection, queue: str, now: int) -> tuple[int, int, int] | None:
    """The (priority, run_at, seq) of the job a claim would take from the queue, if any is due."""
    first = conn.execute(SQL["first_waiting"], (queue,)).fetchone()
    if first is None:
        return None
    if first[1] <= now:
        return (first[0], first[1], first[2])
    for level in levels(conn, queue, now):
        if level.earliest <= now:
            row = conn.execute(SQL["first_of_level"], (queue, level.priority)).fetchone()
            return (row[0], row[1], row[2])
    return None


def oldest_due(conn: sqlite3.Connection, queue: str, now: int) -> int | None:
    """When the queue's longest-waiting due job became due."""
    earliest = min((level.earliest for level in levels(conn, queue, now)), default=None)
    return earliest if earliest is not None and earliest <= now else None


def next_run_at(conn: sqlite3.Connection, after: int) -> int | None:
    """The earliest run_at after `after` of any waiting job."""
    times = [
        level.next_after
        for (queue,) in conn.execute(SQL["waiting_queues"]).fetchall()
        for level in levels(conn, queue, after)
        if level.next_after is not None
    ]
    return min(times, default=None)
