"""Store.metrics for SQLite: every figure from a table that triggers (or the store) keep as
jobs move, so that a scrape costs the same at a hundred jobs or at millions."""

from __future__ import annotations

import sqlite3

from ..base import MetricsSnapshot
from ..figures import snapshot
from . import ready
from .statements import SQL


def read(conn: sqlite3.Connection, now: int) -> MetricsSnapshot:
    """The snapshot, from `conn` inside one read transaction (the caller's)."""
    return snapshot(
        jobs=conn.execute(SQL["metrics_job_counts"]).fetchall(),
        workers=conn.execute(SQL["metrics_worker_statuses"]).fetchall(),
        attempt_totals=conn.execute(SQL["metrics_attempt_totals"]).fetchall(),
        counters=dict(conn.execute(SQL["metrics_counters"]).fetchall()),
        bounds=tuple(le for (le,) in conn.execute(SQL["metrics_histogram_bounds"])),
        buckets=conn.execute(SQL["metrics_histograms"]).fetchall(),
        oldest_waiting_ms=_oldest_waiting(conn, now),
        configured_queues=[name for name, _, _ in conn.execute(SQL["queue_settings"])],
    )


def _oldest_waiting(conn: sqlite3.Connection, now: int) -> int | None:
    """How long the longest-waiting due job of any queue has been due (jobs scheduled for
    later are not waiting yet): a few index seeks per queue, as `queue list` reads it."""
    due = [
        since
        for (queue,) in conn.execute(SQL["waiting_queues"]).fetchall()
        if (since := ready.oldest_due(conn, queue, now)) is not None
    ]
    return max(0, now - min(due)) if due else None
