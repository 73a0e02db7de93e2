"""Metrics: what the store counts, as Prometheus text and as the reference queue's JSON keys.

Everything is read at scrape time from counters the store keeps (Store.metrics), so that any
process can serve them and they stay monotonic across restarts. prometheus_client is imported
only to render: the commands that never render start without it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from .lifecycle import FAILED_OUTCOMES
from .models import ACTIVE_WORKER_STATUSES, JobState, Outcome
from .store import Histogram, MetricsSnapshot, Store

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

# What generate_latest writes: the classic text format, version 0.0.4.
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def read(store: Store) -> MetricsSnapshot:
    return store.metrics(store.now())


def prometheus_text(snapshot: MetricsSnapshot) -> bytes:
    """The snapshot in the Prometheus text format, from a registry of its own: no process or
    platform metrics, and nothing kept between calls."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.registry import Collector

    class SnapshotCollector(Collector):
        def collect(self) -> Iterator[Metric]:
            return _families(snapshot)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector())
    return generate_latest(registry)


def _families(s: MetricsSnapshot) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    # Labels name queues, states, statuses and outcomes only: never a job, command or pid,
    # whose values would grow the number of series without bound; and queues only while they
    # exist (HTTP clients may create only so many: http-max-queues).
    jobs = GaugeMetricFamily(
        "queuectl_jobs", "Jobs per queue and state.", labels=["queue", "state"]
    )
    for (queue, state), n in s.jobs.items():
        jobs.add_metric([queue, state.value], n)
    yield jobs
    workers = GaugeMetricFamily("queuectl_workers", "Workers per status.", labels=["status"])
    for status, n in s.workers.items():
        workers.add_metric([status.value], n)
    yield workers
    yield GaugeMetricFamily(
        "queuectl_oldest_waiting_seconds",
        "How long the longest-waiting due job has waited (0 when none waits).",
        value=(s.oldest_waiting_ms or 0) / 1000,
    )
    attempts = CounterMetricFamily(
        "queuectl_attempts", "Finished attempts per queue and outcome.", labels=["queue", "outcome"]
    )
    for (queue, outcome), n in s.attempts.items():
        if queue in s.queues:  # a queue's series go when it does (the totals keep counting)
            attempts.add_metric([queue, outcome.value], n)
    yield attempts
    for name, documentation, value in (
        ("queuectl_retries", "Attempts that were retries of a job.", s.retries),
        ("queuectl_dead_lettered", "Jobs that became dead (retries exhausted).", s.dead_lettered),
        (
            "queuectl_admission_rejected",
            "Submissions refused because the queue was full.",
            s.admission_rejected,
        ),
        (
            "queuectl_recovered",
            "Attempts whose worker was lost: their jobs were recovered.",
            _attempts(s, Outcome.LOST),
        ),
        (
            "queuectl_late_results",
            "Results that came after their job was recovered, and changed nothing.",
            s.late_results,
        ),
    ):
        yield CounterMetricFamily(name, documentation, value=value)
    yield _histogram(
        "queuectl_queue_wait_seconds", "From when a job was due to its claim.", s.queue_wait
    )
    yield _histogram("queuectl_run_time_seconds", "From a job's claim to its result.", s.run_time)


def _histogram(name: str, documentation: str, histogram: Histogram) -> Metric:
    from prometheus_client.core import HistogramMetricFamily

    # The store counts per bucket; Prometheus wants each bucket to hold those below it too.
    buckets: list[tuple[str, float]] = []
    below = 0
    edges = [repr(bound / 1000) for bound in histogram.bounds_ms] + ["+Inf"]  # 0.005, 1.0
    for edge, n in zip(edges, histogram.counts, strict=True):
        below += n
        buckets.append((edge, below))
    return HistogramMetricFamily(
        name, documentation, buckets=buckets, sum_value=histogram.sum_ms / 1000
    )


def summary(s: MetricsSnapshot) -> dict[str, float]:
    """The reference event-driven queue's figures, under its keys: now, or over all time."""
    return {
        "active_workers": sum(s.workers.get(status, 0) for status in ACTIVE_WORKER_STATUSES),
        "avg_execution_ms": _average_ms(s.run_time),
        "avg_time_in_queue_ms": _average_ms(s.queue_wait),
        "dead_letter_count": _jobs(s, JobState.DEAD),
        "failure_count": _attempts(s, *sorted(FAILED_OUTCOMES)),
        "queue_depth": _jobs(s, JobState.PENDING, JobState.FAILED),
        "retry_count": s.retries,
        "success_count": _attempts(s, Outcome.COMPLETED),
    }


def _jobs(s: MetricsSnapshot, *states: JobState) -> int:
    return sum(n for (_, state), n in s.jobs.items() if state in states)


def _attempts(s: MetricsSnapshot, *outcomes: Outcome) -> int:
    return sum(n for (_, outcome), n in s.attempts.items() if outcome in outcomes)


def _average_ms(histogram: Histogram) -> float:
    return round(histogram.sum_ms / histogram.count, 1) if histogram.count else 0.0
