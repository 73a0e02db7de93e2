"""Store.metrics for SQLite: every figure from a table that triggers (or the store) keep as
jobs move, so that a scrape costs the same at a hundred jobs or at millions."""

from __future__ import annotations

import sqlite3
from collections import Counter

from ...models import STATES, STORED_WORKER_STATUSES, JobState, Outcome, WorkerStatus
from ..base import Histogram, MetricsSnapshot
from . import ready
from .statements import SQL

ABOVE_LAST_BOUND = -1  # attempt_histograms.le of the +Inf bucket (migration 5)


def read(conn: sqlite3.Connection, now: int) -> MetricsSnapshot:
    """The snapshot, from `conn` inside one read transaction (the caller's)."""
    attempts: Counter[tuple[str, Outcome]] = Counter()
    retries = 0
    for queue, outcome, n, queue_retries in conn.execute(SQL["metrics_attempt_totals"]):
        # Outcomes this version does not know fall together under UNKNOWN.
        attempts[(queue, Outcome(outcome))] += n
        retries += queue_retries
    counters = dict(conn.execute(SQL["metrics_counters"]).fetchall())
    bounds = tuple(le for (le,) in conn.execute(SQL["metrics_histogram_bounds"]))
    per_bucket: dict[tuple[str, int], tuple[int, int]] = {
        (metric, le): (n, sum_ms)
        for metric, le, n, sum_ms in conn.execute(SQL["metrics_histograms"])
    }
    return MetricsSnapshot(
        jobs=_jobs(conn),
        workers=_workers(conn),
        oldest_waiting_ms=_oldest_waiting(conn, now),
        attempts=dict(attempts),
        retries=retries,
        dead_lettered=counters.get("dead_lettered", 0),
        late_results=counters.get("late_results", 0),
        admission_rejected=counters.get("admission_rejected", 0),
        queue_wait=_histogram("queue_wait", bounds, per_bucket),
        run_time=_histogram("run_time", bounds, per_bucket),
    )


def _jobs(conn: sqlite3.Connection) -> dict[tuple[str, JobState], int]:
    """Every state of every queue in queue_counts, by queue name: a queue's series stay put
    (at 0) when it empties, as its counter rows do."""
    found = {
        (queue, JobState(state)): n for queue, state, n in conn.execute(SQL["metrics_job_counts"])
    }
    queues = sorted({queue for queue, _ in found})
    return {(queue, state): found.get((queue, state), 0) for queue in queues for state in STATES}


def _workers(conn: sqlite3.Connection) -> dict[WorkerStatus, int]:
    counts = {status: 0 for status in STORED_WORKER_STATUSES}
    for status, n in conn.execute(SQL["metrics_worker_statuses"]):
        shown = WorkerStatus(status)  # UNKNOWN for a status this version does not know
        counts[shown] = counts.get(shown, 0) + n
    return counts


def _oldest_waiting(conn: sqlite3.Connection, now: int) -> int | None:
    """How long the longest-waiting due job of any queue has been due (jobs scheduled for
    later are not waiting yet): a few index seeks per queue, as `queue list` reads it."""
    due = [
        since
        for (queue,) in conn.execute(SQL["waiting_queues"]).fetchall()
        if (since := ready.oldest_due(conn, queue, now)) is not None
    ]
    return max(0, now - min(due)) if due else None


def _histogram(
    metric: str, bounds: tuple[int, ...], per_bucket: dict[tuple[str, int], tuple[int, int]]
) -> Histogram:
    buckets = [per_bucket.get((metric, le), (0, 0)) for le in (*bounds, ABOVE_LAST_BOUND)]
    counts = tuple(n for n, _ in buckets)
    return Histogram(bounds, counts, sum(sum_ms for _, sum_ms in buckets), sum(counts))
