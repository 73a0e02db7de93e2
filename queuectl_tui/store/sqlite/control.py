"""Operators' writes: cancel, retry, delete and prune jobs, pause and limit queues, and the
audit line each of them leaves, in the same transaction as the change it records.

Each runs inside the caller's write transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ...models import Action, JobState
from ..base import CancelResult, RetryResult
from .statements import SQL, chunks, with_list


def record(conn: sqlite3.Connection, action: Action | None, touched: int, now: int) -> None:
    """The audit line of `action` (None: the caller records it once the whole action is done)."""
    if action is None or not action.recorded_for(touched):
        return
    conn.execute(
        SQL["record_action"],
        (now, action.face, action.actor, action.host, action.action, action.subject, touched),
    )


def _among(conn: sqlite3.Connection, name: str, ids: Sequence[str], *params: object) -> list[str]:
    """Run statement `name` over `ids` in chunks; the ids its RETURNING gave."""
    done: list[str] = []
    for chunk in chunks(list(dict.fromkeys(ids))):
        cursor = conn.execute(with_list(name, len(chunk)), (*params, *chunk))
        done.extend(row[0] for row in cursor)
    return done


def states(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, JobState]:
    found: dict[str, JobState] = {}
    for chunk in chunks(list(dict.fromkeys(ids))):
        for job_id, state in conn.execute(with_list("states_among", len(chunk)), tuple(chunk)):
            found[job_id] = JobState(state)
    return found


def cancel(
    conn: sqlite3.Connection, ids: Sequence[str], now: int, action: Action | None
) -> CancelResult:
    cancelled = _among(conn, "cancel_waiting_among", ids, now, now, now)
    requested = _among(conn, "request_cancel_among", ids, now, now)
    record(conn, action, len(cancelled) + len(requested), now)
    return CancelResult(cancelled, requested)


def retry(
    conn: sqlite3.Connection, ids: Sequence[str], now: int, action: Action | None
) -> RetryResult:
    fresh = _among(conn, "retry_finished_among", ids, now, now)
    ready = _among(conn, "retry_now_among", ids, now, now)
    record(conn, action, len(fresh) + len(ready), now)
    return RetryResult(fresh, ready)


def delete(
    conn: sqlite3.Connection,
    ids: Sequence[str],
    now: int,
    action: Action | None,
    state: JobState | None = None,
) -> list[str]:
    if state is None:
        deleted = _among(conn, "delete_among", ids)
    else:
        deleted = _among(conn, "delete_in_state_among", ids, state.value)
    record(conn, action, len(deleted), now)
    return deleted


def prune_batch(conn: sqlite3.Connection, state: JobState, before: int, limit: int) -> int:
    """Delete up to `limit` of the oldest `state` jobs finished before `before`."""
    seqs = [row[0] for row in conn.execute(SQL["prunable"], (state.value, before, limit))]
    if seqs:
        conn.execute(with_list("delete_seqs", len(seqs)), seqs)
    return len(seqs)


def set_paused(conn: sqlite3.Connection, name: str, paused: bool, now: int, action: Action) -> None:
    conn.execute(SQL["set_queue_paused"], (name, int(paused), now))
    record(conn, action, 1, now)


def set_limit(
    conn: sqlite3.Connection, name: str, limit: int | None, now: int, action: Action
) -> None:
    conn.execute(SQL["set_queue_limit"], (name, limit, now))
    record(conn, action, 1, now)
