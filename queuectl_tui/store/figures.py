"""Figures every backend derives the same way from what it reads: latency summaries, the
per-minute rates folded from counts per 10 s, attempt totals, and the metrics snapshot."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from ..lifecycle import FAILED_OUTCOMES
from ..models import STATES, STORED_WORKER_STATUSES, JobState, Outcome, WorkerStatus
from .base import Histogram, MetricsSnapshot, QueueStats

RATE_SLOT_MS = 10_000  # the width of a slot of the attempt rates (a count per 10 s)


def summary(values: list[int]) -> dict[str, float | None]:
    """The average, median and 95th percentile of `values` (None each when there are none)."""
    if not values:
        return {"avg": None, "p50": None, "p95": None}
    ordered = sorted(values)

    def pick(fraction: float) -> float:
        return float(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])

    return {"avg": sum(ordered) / len(ordered), "p50": pick(0.50), "p95": pick(0.95)}


def per_minute(
    slots: Iterable[tuple[int, int, int]], now: int, minutes: int
) -> tuple[list[int], list[int]]:
    """Completed and failed attempts in each of the last `minutes` minutes before `now`, oldest
    first, from (slot, completed, failed) counts per 10 s (a slot counts in the minute it
    starts in)."""
    since = now - minutes * 60_000
    completed = [0] * minutes
    failed = [0] * minutes
    for slot, done, failures in slots:
        index = min(max((slot * RATE_SLOT_MS - since) // 60_000, 0), minutes - 1)
        completed[index] += done
        failed[index] += failures
    return completed, failed


ABOVE_LAST_BOUND = -1  # a histogram's bucket above its last bound (le of +Inf)
# Outcomes that count as failed attempts (cancelled and interrupted runs did not fail).
FAILED_OUTCOME_NAMES = frozenset(outcome.value for outcome in FAILED_OUTCOMES)


def attempt_figures(
    result: QueueStats,
    last_minute: Iterable[tuple[bool, int]],
    totals: Iterable[tuple[str, int, int]],
    timings: list[tuple[int, int]],
) -> None:
    """Fill `result` from the attempts of the last minute (completed or not, count), the
    totals per outcome (outcome, n, retries) and the latest (queue wait, run time) pairs."""
    for ok, count in last_minute:
        if ok:
            result.completed_last_minute = count
        else:
            result.failed_last_minute = count
    rows = list(totals)
    result.attempts_total = sum(n for _, n, _ in rows)
    result.attempts_failed = sum(n for outcome, n, _ in rows if outcome in FAILED_OUTCOME_NAMES)
    result.retries = sum(retries for _, _, retries in rows)
    result.sample_size = len(timings)
    result.wait_ms = summary([max(0, wait) for wait, _ in timings])
    result.run_ms = summary([run for _, run in timings])


def snapshot(
    jobs: Iterable[tuple[str, str, int]],
    workers: Iterable[tuple[str, int]],
    attempt_totals: Iterable[tuple[str, str, int, int]],
    counters: Mapping[str, int],
    bounds: tuple[int, ...],
    buckets: Iterable[tuple[str, int, int, int]],
    oldest_waiting_ms: int | None,
    configured_queues: Iterable[str] = (),
) -> MetricsSnapshot:
    """Metrics from the counters' rows: jobs (queue, state, n), workers (status, n), attempt
    totals (queue, outcome, n, retries), event counters by name, the histogram's bounds and
    its buckets (metric, le, n, sum_ms; per bucket, not cumulative).

    Series per queue are only for the queues that exist: those holding a job, and those an
    operator configured (paused, or given a limit). A queue's series go when it does, so
    names that clients made up cannot grow a scrape for ever; the totals (and `attempts`)
    keep every count."""
    found: Counter[tuple[str, JobState]] = Counter()
    for queue, state, n in jobs:
        found[(queue, JobState(state))] += n
    existing = {queue for (queue, _), n in found.items() if n > 0} | set(configured_queues)
    queues = sorted(existing)
    attempts: Counter[tuple[str, Outcome]] = Counter()
    retries = 0
    for queue, outcome, n, queue_retries in attempt_totals:
        # Outcomes this version does not know fall together under UNKNOWN.
        attempts[(queue, Outcome(outcome))] += n
        retries += queue_retries
    per_bucket = {(metric, le): (n, sum_ms) for metric, le, n, sum_ms in buckets}
    statuses = {status: 0 for status in STORED_WORKER_STATUSES}
    for status, n in workers:
        shown = WorkerStatus(status)  # UNKNOWN for a status this version does not know
        statuses[shown] = statuses.get(shown, 0) + n
    return MetricsSnapshot(
        jobs={(queue, state): found.get((queue, state), 0) for queue in queues for state in STATES},
        workers=statuses,
        oldest_waiting_ms=oldest_waiting_ms,
        attempts=dict(attempts),
        retries=retries,
        dead_lettered=counters.get("dead_lettered", 0),
        late_results=counters.get("late_results", 0),
        admission_rejected=counters.get("admission_rejected", 0),
        queue_wait=_histogram("queue_wait", bounds, per_bucket),
        run_time=_histogram("run_time", bounds, per_bucket),
        queues=frozenset(existing),
    )


def _histogram(
    metric: str, bounds: tuple[int, ...], per_bucket: Mapping[tuple[str, int], tuple[int, int]]
) -> Histogram:
    buckets = [per_bucket.get((metric, le), (0, 0)) for le in (*bounds, ABOVE_LAST_BOUND)]
    counts = tuple(n for n, _ in buckets)
    return Histogram(bounds, counts, sum(sum_ms for _, sum_ms in buckets), sum(counts))
