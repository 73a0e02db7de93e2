"""The engine's writes on PostgreSQL: settle runs and claim jobs in one exchange; recover lost
workers' jobs. Each runs inside the caller's transaction (READ COMMITTED).

Claims lock what they take (FOR UPDATE SKIP LOCKED) and settlements are fenced by id, owner
and run, so pools on any number of hosts each take a job once and a late result changes
nothing. Queues with a limit on running jobs are locked for the rest of a claiming
transaction, so that pools claiming from them take turns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from ...lifecycle import RetryPolicy
from ...models import FINISHED_STATES, Job, JobState, Outcome
from .. import dependencies
from ..base import ClaimRequest, Exchange, Settlement, SettleResult
from ..rows import JOBS
from ..settling import WorkerTouch, error_group, lost_run, made_work_by, step_after, tally
from .links import PostgresLinks
from .statements import SQL

Conn = psycopg.Connection[Any]

# The most workers one exchange claims for: a pool's most (worker start --count). The claim
# statements' pick takes at most this many jobs at one priority (a constant there, so that
# its plan is the same for any parameters: see `claim` in queries.sql).
MOST_CLAIMANTS = 256


def text(value: str | None) -> str | None:
    """Text as PostgreSQL can hold it: NUL, which a command's output may contain, becomes
    U+FFFD (text values cannot hold NUL)."""
    return None if value is None else value.replace("\x00", "\ufffd")


@dataclass(slots=True)
class _Attempts:
    """The attempts an exchange records, inserted in one statement at its end."""

    rows: list[tuple[Any, ...]]

    # The columns of record_attempts, each an array of one value per attempt.
    COLUMNS = (
        "job_seq",
        "queue",
        "number",
        "worker_id",
        "scheduled_at",
        "started_at",
        "finished_at",
        "exit_code",
        "outcome",
        "output",
        "error",
    )

    def add(self, settlement: Settlement, queue: str, scheduled_at: int) -> None:
        job = settlement.job
        self.rows.append(
            (
                job.seq,
                queue,
                job.runs,
                job.worker_id,
                scheduled_at,
                job.claimed_at or settlement.finished_at,
                settlement.finished_at,
                settlement.exit_code,
                settlement.outcome.value,
                text(settlement.output) or "",
                text(settlement.error),
            )
        )

    def insert(self, conn: Conn) -> None:
        if self.rows:
            columns = zip(*self.rows, strict=True)
            params = dict(zip(self.COLUMNS, map(list, columns), strict=True))
            conn.execute(SQL["record_attempts"], params)


def exchange(
    conn: Conn, request: ClaimRequest, under_limits: bool = True
) -> tuple[Exchange, bool, list[str]]:
    """Settle and claim in one transaction: the runs that did not complete first, by the
    lifecycle's rules; then the completed ones, the claims and the workers' rows in one
    statement (see `exchange` in queries.sql). Returns what it did, whether a queue with
    a limit was open to the pool, and the completed jobs whose children are still to move.

    `under_limits`: in a transaction, where claims under a queue's limit are made the slower
    way, and children move, here. Else the statement alone, its own transaction (the hot
    path): the caller does both, in a transaction (claim_under_limits, free_children)."""
    settlements, claimants, now = request.settlements, request.claimants, request.now
    if len(claimants) > MOST_CLAIMANTS:
        raise ValueError(f"one exchange claims for at most {MOST_CLAIMANTS} workers")
    # Job rows are locked in seq order (as recovery locks them), whatever order runs ended in.
    in_seq_order = sorted(settlements, key=lambda s: s.job.seq)
    completed = [s for s in in_seq_order if s.outcome is Outcome.COMPLETED]
    others = [s for s in in_seq_order if s.outcome is not Outcome.COMPLETED]
    results: dict[int, SettleResult] = {}
    touched: dict[str, WorkerTouch] = {}
    ended: list[tuple[str, str]] = []  # jobs others run after, ended
    if others:
        # Worker rows before job rows, as the statement below and recovery take them.
        owners = {s.job.worker_id for s in settlements if s.job.worker_id} | set(claimants)
        conn.execute(SQL["lock_workers"], {"ids": sorted(owners)})
        settled_others = settle(conn, others, request.policy, ended)
        touched = tally(others, settled_others)
        results = {id(s): r for s, r in zip(others, settled_others, strict=True)}
    cursor = conn.execute(
        SQL["exchange"],
        exchange_parameters(completed, claimants, request.pid, now, request.queues, touched),
    )
    rows = cursor.fetchall()
    limited, settled_seqs, freeing = rows[0][0], set(rows[0][1]), rows[0][2]
    taken = [row for row in rows if row[3] is not None]  # no claim: the head row alone
    jobs = JOBS.from_rows(SQL["exchange"], taken, cursor.description or [])
    for settlement in completed:
        settled = settlement.job.seq in settled_seqs
        results[id(settlement)] = (
            SettleResult(JobState.COMPLETED, settlement.job.run_at)
            if settled
            else SettleResult(None, None)  # fenced out: recovered meanwhile (counted late)
        )
    assert under_limits or not ended  # the hot path settles completed runs only
    ordered = [results[id(s)] for s in settlements]
    made_work = made_work_by(ordered, bool(ended or freeing), bool(limited))
    if under_limits:  # in a transaction: the children of what ended move now
        dependencies.parents_ended(PostgresLinks(conn), ended, now)
        free_children(conn, freeing, now)
        freeing = []
    claimed = {job.worker_id: job for job in jobs if job.worker_id is not None}
    if limited and claimants and under_limits:
        claimed = claim_under_limits(conn, claimants, request.pid, now, request.queues)
    return Exchange(ordered, claimed, made_work), bool(limited), freeing


def free_children(conn: Conn, completed: Sequence[str], now: int) -> None:
    """Move the children of jobs the exchange statement completed (their links say so)."""
    if completed:
        ended = [(job_id, JobState.COMPLETED.value) for job_id in completed]
        dependencies.parents_ended(PostgresLinks(conn), ended, now, links_ended=True)


def exchange_parameters(
    completed: Sequence[Settlement],
    claimants: Sequence[str],
    pid: int,
    now: int,
    queues: Sequence[str] | None,
    touched: dict[str, WorkerTouch],
) -> dict[str, Any]:
    """The `exchange` statement's parameters: completed runs, claimants and touched workers
    as parallel arrays."""
    return {
        "seqs": [s.job.seq for s in completed],
        "owners": [s.job.worker_id for s in completed],
        "runs": [s.job.runs for s in completed],
        "finished": [s.finished_at for s in completed],
        "exits": [s.exit_code for s in completed],
        "errors": [text(s.error) for s in completed],
        "outputs": [text(s.output) or "" for s in completed],
        "claimants": list(claimants),
        "served": _served(queues),
        "now": now,
        "pid": pid,
        "touch_ids": list(touched),
        "touch_done": [t.done for t in touched.values()],
        "touch_failed": [t.failed for t in touched.values()],
    }


def _served(queues: Sequence[str] | None) -> list[str] | None:
    """The served queues as the claim statements take them: each once (a queue named twice
    would be looked into twice, and its jobs picked twice)."""
    return None if queues is None else list(dict.fromkeys(queues))


def claim_under_limits(
    conn: Conn, claimants: Sequence[str], pid: int, now: int, queues: Sequence[str] | None
) -> dict[str, Job]:
    """The claims of an exchange when a queue with a limit is open to the pool: its lock and
    count first, then one job at a time (see `claim`), and the claimed workers' rows."""
    workers = _active_workers(conn, claimants)
    claimed: dict[str, Job] = {}
    for job in claim(conn, workers, pid, now, queues) if workers else []:
        assert job.worker_id is not None
        claimed[job.worker_id] = job
    if claimed:
        conn.execute(
            SQL["touch_workers"],
            {
                "now": now,
                "id": list(claimed),
                "job": [job.id for job in claimed.values()],
                "done": [0] * len(claimed),
                "failed": [0] * len(claimed),
                "status": ["busy"] * len(claimed),
            },
        )
    return claimed


def _closed_and_limited(
    conn: Conn, served: Sequence[str] | None
) -> tuple[list[str], dict[str, int]]:
    """Paused queues, and the limited ones a claim may take from with the room each has left
    (their rows locked until the transaction ends)."""
    closed: list[str] = []
    limited: list[str] = []
    for name, paused, max_running in conn.execute(SQL["queue_settings"]).fetchall():
        if paused:
            closed.append(name)
        elif max_running is not None and (served is None or name in served):
            limited.append(name)
    room: dict[str, int] = {}
    if limited:
        limits = dict(conn.execute(SQL["lock_limited_queues"], {"queues": limited}).fetchall())
        running = dict(conn.execute(SQL["running_in_queues"], {"queues": list(limits)}).fetchall())
        for name, max_running in limits.items():
            room[name] = max(0, max_running - running.get(name, 0))
            if room[name] == 0:
                closed.append(name)
    return closed, room


def claim(
    conn: Conn, workers: Sequence[str], pid: int, now: int, served: Sequence[str] | None
) -> list[Job]:
    """Take the best due jobs for `workers`, in claim order, one per worker."""
    closed, room = _closed_and_limited(conn, served)
    params: dict[str, Any] = {
        "now": now,
        "pid": pid,
        "served": _served(served),
        "closed": closed,
    }
    if not any(room.get(name, 0) for name in room):
        # No queue with a limit is open: one statement claims for every worker.
        return JOBS.all(conn, SQL["claim"], {**params, "n": len(workers), "workers": list(workers)})
    # A limit in play: one job at a time, closing each queue when it reaches its limit.
    taken: list[Job] = []
    for worker in workers:
        params["closed"] = closed
        found = JOBS.all(conn, SQL["claim"], {**params, "n": 1, "workers": [worker]})
        if not found:
            break
        job = found[0]
        taken.append(job)
        if job.queue in room:
            room[job.queue] -= 1
            if room[job.queue] <= 0:
                closed = [*closed, job.queue]
    return taken


def _active_workers(conn: Conn, worker_ids: Sequence[str]) -> list[str]:
    """The given workers that are still active, in the given order: a worker another pool
    declared lost must not take work (its jobs would be orphans at once)."""
    if not worker_ids:
        return []
    rows = conn.execute(SQL["active_workers_among"], (list(worker_ids),)).fetchall()
    active = {row[0] for row in rows}
    return [worker_id for worker_id in worker_ids if worker_id in active]


def settle(
    conn: Conn,
    settlements: Sequence[Settlement],
    policy: RetryPolicy,
    ended: list[tuple[str, str]],
) -> list[SettleResult]:
    """Record each run that did not complete, fenced, by the lifecycle's rules (completed
    runs are recorded by the exchange statement), with their attempts in one insert. Jobs
    that ended and that others run after are added to `ended` (see free_dependents)."""
    attempts = _Attempts([])
    results = [
        _settle_other(conn, settlement, policy, attempts, ended) for settlement in settlements
    ]
    attempts.insert(conn)
    late = sum(result.state is None for result in results)
    if late:
        conn.execute(SQL["add_to_counter"], {"name": "late_results", "n": late})
    return results


def _settle_other(
    conn: Conn,
    settlement: Settlement,
    policy: RetryPolicy,
    attempts: _Attempts,
    ended: list[tuple[str, str]],
) -> SettleResult:
    """A run that did not complete: where its job goes is the lifecycle's rule."""
    assert settlement.outcome is not Outcome.COMPLETED  # the exchange statement's
    job = settlement.job
    fence = {"seq": job.seq, "worker_id": job.worker_id, "runs": job.runs}
    row = conn.execute(SQL["job_to_settle"], fence).fetchone()
    if row is None:
        return _recorded_before(conn, settlement)
    scheduled_at, spent, max_retries, cancel_requested, queue, has_dependents = row
    now = settlement.finished_at
    step = step_after(settlement, (scheduled_at, spent, max_retries, cancel_requested), policy)
    conn.execute(
        SQL["settle_job"],
        {
            "state": step.state.value,
            "run_at": step.run_at,
            "attempts": step.attempts,
            "now": now,
            "exit_code": settlement.exit_code,
            "error": text(settlement.error),
            "error_group": text(error_group(settlement, step.state)),
            "seq": job.seq,
        },
    )
    attempts.add(settlement, queue, scheduled_at)
    if has_dependents and step.state in FINISHED_STATES:
        ended.append((job.id, step.state.value))
    return SettleResult(step.state, step.run_at)


def _recorded_before(conn: Conn, settlement: Settlement) -> SettleResult:
    """A run fenced out: recorded already, by an exchange whose answer was lost (its attempt
    is there with this outcome), or else recovered meanwhile (a late result). A lost run's
    attempt is recovery's, never a pool's own: a result saying so is late, whatever is there."""
    job = settlement.job
    if settlement.outcome is Outcome.LOST:
        return SettleResult(None, None)
    ran = {
        "seq": job.seq,
        "runs": job.runs,
        "worker_id": job.worker_id,
        "outcome": settlement.outcome.value,
    }
    row = conn.execute(SQL["recorded_run"], ran).fetchone()
    if row is None:
        return SettleResult(None, None)  # fenced out: recovered meanwhile
    state = JobState(row[0])
    # The job may have moved on since (run again elsewhere): the outcome is what was recorded.
    if state in (JobState.PENDING, JobState.PROCESSING):
        state = JobState.FAILED if settlement.outcome is not Outcome.INTERRUPTED else state
    return SettleResult(state, int(row[1]))


def hand_back_unseen(
    conn: Conn, worker_ids: Sequence[str], settling: Sequence[int], now: int, policy: RetryPolicy
) -> int:
    """Hand back, without spending an attempt, the jobs that `worker_ids` hold in the store
    but that their pool never heard it claimed: an exchange whose answer was lost may have
    committed claims for them. Fenced by owner and run (the rows are locked first), so a job
    recovered or settled meanwhile is left as it is. Returns how many went back."""
    owners = sorted(set(worker_ids))
    conn.execute(SQL["lock_workers"], {"ids": owners})
    unseen = JOBS.all(
        conn, SQL["unseen_claims"], {"worker_ids": owners, "settling": list(settling)}
    )
    if not unseen:
        return 0
    back = [
        Settlement(
            job=job,
            outcome=Outcome.INTERRUPTED,
            exit_code=None,
            output="",
            error="handed back unrun: the answer to its claim was lost on the way to the pool",
            finished_at=now,
        )
        for job in unseen
    ]
    ended: list[tuple[str, str]] = []  # a job whose cancel was asked for ends cancelled
    settle(conn, back, policy, ended)
    dependencies.parents_ended(PostgresLinks(conn), ended, now)
    return len(unseen)


def recover_orphans(
    conn: Conn, dead_worker_ids: Sequence[str], policy: RetryPolicy, now: int
) -> list[Job]:
    """Mark the workers lost, then settle every job in flight without an active owner as lost.
    Pools recovering at once take turns (an advisory lock), so each job is recovered once.
    Jobs left waiting for parents that have ended move too (dependencies.sweep)."""
    conn.execute(SQL["recovery_lock"])
    if dead_worker_ids:
        dead = sorted(set(dead_worker_ids))
        conn.execute(SQL["lock_workers"], {"ids": dead})  # worker rows first, as an exchange
        conn.execute(SQL["mark_workers_lost"], {"now": now, "ids": dead})
    # A pool that died between its exchange and moving the children of what it completed
    # (the hot path's two transactions) left them waiting: they move now.
    dependencies.sweep(PostgresLinks(conn), now)
    orphans = JOBS.all(conn, SQL["orphaned_jobs"])
    if not orphans:
        return []
    lost = [lost_run(job, now) for job in orphans]
    ended: list[tuple[str, str]] = []
    settle(conn, lost, policy, ended)
    dependencies.parents_ended(PostgresLinks(conn), ended, now)
    recovered = []
    for job in orphans:
        after = JOBS.first(conn, SQL["job_by_seq"], {"seq": job.seq})
        assert after is not None  # settled, not deleted
        recovered.append(after)
    return recovered
