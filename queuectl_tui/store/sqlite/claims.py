"""The engine's writes: settle runs and claim jobs in one exchange; recover lost workers' jobs.

Each runs inside the caller's write transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ...lifecycle import RetryPolicy
from ...models import FINISHED_STATES, Job, JobState, Outcome
from .. import dependencies
from ..base import ClaimRequest, Exchange, Settlement, SettleResult
from ..rows import JOBS
from ..settling import WorkerTouch, error_group, lost_run, made_work_by, step_after, tally
from . import ready
from .links import SqliteLinks
from .statements import SQL, chunks, with_list


def exchange(conn: sqlite3.Connection, request: ClaimRequest) -> Exchange:
    """Record each settlement, then claim a job for each claimant while there are any (from
    `queues` only, if given)."""
    settlements, now, pid = request.settlements, request.now, request.pid
    ended: list[tuple[str, str]] = []
    settled = [_settle_one(conn, s, request.policy, ended) for s in settlements]
    if ended:  # before the claims: a job they free may be claimed at once
        dependencies.parents_ended(SqliteLinks(conn), ended, now)
    touched = tally(settlements, settled)
    claimed: dict[str, Job] = {}
    workers = _active_workers(conn, request.claimants)
    open_queues = claimable_queues(conn, request.queues) if workers else {}
    for worker_id in workers:
        owner = {"worker_id": worker_id, "worker_pid": pid, "now": now}
        job = _claim_one(conn, open_queues, owner, now)
        if job is None:
            break
        claimed[worker_id] = job
        touched.setdefault(worker_id, WorkerTouch()).job = job
    conn.executemany(
        SQL["touch_worker"],
        [
            {
                "current_job": None if touch.job is None else touch.job.id,
                "now": now,
                "done": touch.done,
                "failed": touch.failed,
                "status": "idle" if touch.job is None else "busy",
                "id": worker_id,
            }
            for worker_id, touch in touched.items()
        ],
    )
    return Exchange(settled, claimed, _made_work(conn, settlements, settled, ended))


def _made_work(
    conn: sqlite3.Connection,
    settlements: Sequence[Settlement],
    settled: Sequence[SettleResult],
    ended: Sequence[tuple[str, str]],
) -> bool:
    """Whether the exchange may have given some pool's worker work: a job back to waiting, a
    dependent freed, or a run ended in a queue with a limit (room for one more, which a pool
    serving that queue may be waiting for): the queues with a limit read only if need be."""
    if made_work_by(settled, bool(ended), limited=False):
        return True
    queues = {s.job.queue for s, r in zip(settlements, settled, strict=True) if r.state is not None}
    if not queues:
        return False
    limited = {name for (name,) in conn.execute(SQL["limited_queues"])}
    return not queues.isdisjoint(limited)


def claimable_queues(
    conn: sqlite3.Connection, served: Sequence[str] | None
) -> dict[str, int | None]:
    """The queues a claim may take from now (jobs waiting, not paused, among `served`), each
    with how many more of its jobs may start (None: no limit)."""
    open_queues: dict[str, int | None] = {}
    wanted = None if served is None else set(served)
    for name, max_running, running in conn.execute(SQL["claimable_queues"]):
        if wanted is not None and name not in wanted:
            continue
        room = None if max_running is None else max_running - running
        if room is None or room > 0:
            open_queues[name] = room
    return open_queues


def has_due_work(conn: sqlite3.Connection, served: Sequence[str] | None, now: int) -> bool:
    return any(
        ready.best_due(conn, name, now) is not None for name in claimable_queues(conn, served)
    )


def _claim_one(
    conn: sqlite3.Connection,
    open_queues: dict[str, int | None],
    owner: dict[str, object],
    now: int,
) -> Job | None:
    """Take the best due job among `open_queues` (updated: a queue with nothing due, or at
    its limit, is left out of the rest of this exchange)."""
    while open_queues:
        job = None
        if len(open_queues) == 1:  # the common case: one statement finds and takes it
            [name] = open_queues
            job = JOBS.first(conn, SQL["claim_next"], {**owner, "queue": name})
        if job is None:
            best: tuple[int, int, int] | None = None
            chosen = ""
            for name in list(open_queues):
                found = ready.best_due(conn, name, now)
                if found is None:
                    del open_queues[name]
                    continue
                key = (-found[0], found[1], found[2])
                if best is None or key < best:
                    best, chosen = key, name
            if best is None:
                return None
            name = chosen
            job = JOBS.first(conn, SQL["claim_seq"], {**owner, "seq": best[2]})
        if job is None:
            del open_queues[name]
            continue
        room = open_queues[name]
        if room is not None:
            if room <= 1:
                del open_queues[name]
            else:
                open_queues[name] = room - 1
        return job
    return None


def recover_orphans(
    conn: sqlite3.Connection, dead_worker_ids: Sequence[str], policy: RetryPolicy, now: int
) -> list[Job]:
    """Mark the workers lost, then settle every job in flight without an active owner as lost."""
    for chunk in chunks(list(dead_worker_ids)):
        conn.execute(with_list("mark_workers_lost", len(chunk)), (now, *chunk))
    # Jobs left waiting for parents that have ended move (dependencies.sweep: on SQLite a
    # parent's end and its children's move share a transaction, so only a file changed by
    # hand, or by a version that crashed between the two, leaves any).
    dependencies.sweep(SqliteLinks(conn), now)
    recovered: list[Job] = []
    ended: list[tuple[str, str]] = []
    for job in JOBS.all(conn, SQL["orphaned_jobs"]):
        _settle_one(conn, lost_run(job, now), policy, ended)
        after = JOBS.first(conn, SQL["job_by_seq"], {"seq": job.seq})
        assert after is not None  # settled, not deleted
        recovered.append(after)
    if ended:
        dependencies.parents_ended(SqliteLinks(conn), ended, now)
    return recovered


def _active_workers(conn: sqlite3.Connection, worker_ids: Sequence[str]) -> list[str]:
    """The given workers that are still active, in the given order. A worker another pool
    has declared lost must not take work: its jobs would be orphans at once, recovered and
    run again while it still runs them."""
    if not worker_ids:
        return []
    active: set[str] = set()
    for chunk in chunks(worker_ids):
        statement = with_list("active_workers_among", len(chunk))
        active.update(row[0] for row in conn.execute(statement, tuple(chunk)))
    return [worker_id for worker_id in worker_ids if worker_id in active]


def _late(conn: sqlite3.Connection) -> SettleResult:
    """A result the fence turned away (its job was recovered meanwhile): it changes nothing
    but the count of late results."""
    conn.execute(SQL["add_to_counter"], {"name": "late_results", "n": 1})
    return SettleResult(None, None)


def _settle_one(
    conn: sqlite3.Connection,
    settlement: Settlement,
    policy: RetryPolicy,
    ended: list[tuple[str, str]],
) -> SettleResult:
    """Record one run, fenced; a job that ended and has dependents is added to `ended`."""
    job = settlement.job
    now = settlement.finished_at
    outcome = settlement.outcome
    fence = {"seq": job.seq, "worker_id": job.worker_id, "runs": job.runs}  # see complete_job
    if outcome is Outcome.COMPLETED:
        ended_run = {"now": now, "exit_code": settlement.exit_code, "error": settlement.error}
        row = conn.execute(SQL["complete_job"], {**ended_run, **fence}).fetchone()
        if row is None:
            return _late(conn)
        state, scheduled_at, has_dependents = JobState.COMPLETED, row[0], row[1]
        run_at = scheduled_at
    else:
        row = conn.execute(SQL["job_to_settle"], fence).fetchone()
        if row is None:
            return _late(conn)
        scheduled_at, attempts, max_retries, cancel_requested, has_dependents = row
        fenced = (scheduled_at, attempts, max_retries, cancel_requested)
        step = step_after(settlement, fenced, policy)
        state, run_at, attempts = step.state, step.run_at, step.attempts
        conn.execute(
            SQL["settle_job"],
            {
                "state": state.value,
                "run_at": run_at,
                "attempts": attempts,
                "now": now,
                "exit_code": settlement.exit_code,
                "error": settlement.error,
                "error_group": error_group(settlement, state),
                "seq": job.seq,
            },
        )
    conn.execute(
        SQL["record_attempt"],
        {
            "job_seq": job.seq,
            "number": job.runs,
            "worker_id": job.worker_id,
            "scheduled_at": scheduled_at,
            "started_at": job.claimed_at or now,
            "finished_at": now,
            "exit_code": settlement.exit_code,
            "outcome": outcome.value,
            "output": settlement.output,
            "error": settlement.error,
        },
    )
    if has_dependents and state in FINISHED_STATES:
        ended.append((job.id, state.value))
    return SettleResult(state, run_at)
