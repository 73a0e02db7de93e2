"""The engine's writes: settle runs and claim jobs in one exchange; recover lost workers' jobs.

Each runs inside the caller's write transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ...lifecycle import RetryPolicy, after_attempt
from ...models import Job, JobState, Outcome
from ..base import Exchange, Settlement, SettleResult
from ..rows import JOBS
from ..settling import WorkerTouch, error_group, tally
from . import ready
from .statements import SQL, chunks, with_list


def exchange(
    conn: sqlite3.Connection,
    settlements: Sequence[Settlement],
    claimants: Sequence[str],
    pid: int,
    now: int,
    policy: RetryPolicy,
    queues: Sequence[str] | None = None,
) -> Exchange:
    """Record each settlement, then claim a job for each claimant while there are any (from
    `queues` only, if given)."""
    settled = [_settle_one(conn, settlement, policy) for settlement in settlements]
    touched = tally(settlements, settled)
    claimed: dict[str, Job] = {}
    workers = _active_workers(conn, claimants)
    open_queues = claimable_queues(conn, queues) if workers else {}
    for worker_id in workers:
        job = _claim_one(conn, open_queues, (worker_id, pid, now, now), now)
        if job is None:
            break
        claimed[worker_id] = job
        touched.setdefault(worker_id, WorkerTouch()).job = job
    conn.executemany(
        SQL["touch_worker"],
        [
            (
                None if touch.job is None else touch.job.id,
                now,
                touch.done,
                touch.failed,
                "idle" if touch.job is None else "busy",
                worker_id,
            )
            for worker_id, touch in touched.items()
        ],
    )
    return Exchange(settled, claimed)


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
    owner: tuple[str, int, int, int],
    now: int,
) -> Job | None:
    """Take the best due job among `open_queues` (updated: a queue with nothing due, or at
    its limit, is left out of the rest of this exchange)."""
    while open_queues:
        job = None
        if len(open_queues) == 1:  # the common case: one statement finds and takes it
            [name] = open_queues
            job = JOBS.first(conn, SQL["claim_next"], (*owner, name, now))
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
            job = JOBS.first(conn, SQL["claim_seq"], (*owner, best[2]))
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
    recovered: list[Job] = []
    for job in JOBS.all(conn, SQL["orphaned_jobs"]):
        lost = Settlement(
            job=job,
            outcome=Outcome.LOST,
            exit_code=None,
            output="",
            error=f"worker {job.worker_id} (pid {job.worker_pid}) was lost mid-job",
            finished_at=now,
        )
        _settle_one(conn, lost, policy)
        after = JOBS.first(conn, SQL["job_by_seq"], (job.seq,))
        assert after is not None  # settled, not deleted
        recovered.append(after)
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
    conn.execute(SQL["add_to_counter"], (1, "late_results"))
    return SettleResult(None, None)


def _settle_one(
    conn: sqlite3.Connection, settlement: Settlement, policy: RetryPolicy
) -> SettleResult:
    job = settlement.job
    now = settlement.finished_at
    outcome = settlement.outcome
    fence = (job.seq, job.worker_id, job.runs)  # see complete_job in queries.sql
    if outcome is Outcome.COMPLETED:
        row = conn.execute(
            SQL["complete_job"], (now, settlement.exit_code, settlement.error, now, *fence)
        ).fetchone()
        if row is None:
            return _late(conn)
        state, scheduled_at = JobState.COMPLETED, row[0]
        run_at = scheduled_at
    else:
        row = conn.execute(SQL["job_to_settle"], fence).fetchone()
        if row is None:
            return _late(conn)
        scheduled_at, attempts, max_retries, cancel_requested = row
        step = after_attempt(
            outcome,
            attempts=attempts,
            max_retries=max_retries,
            scheduled_at=scheduled_at,
            now=now,
            policy=policy,
            cancel_requested=bool(cancel_requested),
        )
        state, run_at, attempts = step.state, step.run_at, step.attempts
        conn.execute(
            SQL["settle_job"],
            (
                state.value,
                run_at,
                attempts,
                now,
                settlement.exit_code,
                settlement.error,
                error_group(settlement, state),
                now,
                job.seq,
            ),
        )
    conn.execute(
        SQL["record_attempt"],
        (
            job.seq,
            job.runs,
            job.worker_id,
            scheduled_at,
            job.claimed_at or now,
            now,
            settlement.exit_code,
            outcome.value,
            settlement.output,
            settlement.error,
        ),
    )
    return SettleResult(state, run_at)
