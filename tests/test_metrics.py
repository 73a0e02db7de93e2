"""Metrics: the store's snapshot moves with real claims and settles and survives reopening,
costs the same at any size; the Prometheus text and the summary say what the snapshot holds;
`queuectl metrics` prints both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from store_helpers import NOW, POLICY, claim, register, settle, sqlite_file, sqlite_steps

from queuectl_tui import metrics
from queuectl_tui.bench.history import complete_all, enqueue_jobs
from queuectl_tui.models import STATES, JobState, Outcome, WorkerStatus
from queuectl_tui.store import Admission, Histogram, MetricsSnapshot, Store, open_store
from queuectl_tui.store.sqlite import metrics as sqlite_metrics

from helpers import SEED_METRIC_KEYS, RunCli, open_backend, spec

BOUNDS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000,
          1800000, 3600000)  # fmt: skip
SUMMARY_KEYS = SEED_METRIC_KEYS


def _buckets(**at: int) -> tuple[int, ...]:
    """Counts per bucket of BOUNDS (and +Inf), given as le5=1, le1000=2, inf=1."""
    edges = [f"le{bound}" for bound in BOUNDS] + ["inf"]
    return tuple(at.get(edge, 0) for edge in edges)


# -- the store -----------------------------------------------------------------------------------
def test_a_fresh_queue_reports_zeros_and_every_worker_status(store: Store) -> None:
    snapshot = store.metrics(NOW)
    assert all(n == 0 for n in snapshot.jobs.values())
    assert snapshot.workers == {
        WorkerStatus.IDLE: 0,
        WorkerStatus.BUSY: 0,
        WorkerStatus.STOPPING: 0,
        WorkerStatus.STOPPED: 0,
        WorkerStatus.LOST: 0,
    }
    assert snapshot.oldest_waiting_ms is None and snapshot.attempts == {}
    counters = (snapshot.retries, snapshot.dead_lettered, snapshot.late_results)
    assert counters == (0, 0, 0) and snapshot.admission_rejected == 0
    for histogram in (snapshot.queue_wait, snapshot.run_time):
        assert histogram == Histogram(BOUNDS, _buckets(), 0, 0)


def test_jobs_per_queue_and_state_and_workers_per_status(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    assert claim(store, "w1").id == "a"
    register(store, "w2", status=WorkerStatus.STOPPING)
    register(store, "w3")
    store.set_worker_status("w3", WorkerStatus.STOPPED, None, NOW)
    store.enqueue_many([spec(id="b", queue="reports"), spec(id="c", queue="reports")], 3, NOW)
    snapshot = store.metrics(NOW)
    assert set(snapshot.jobs) == {(q, s) for q in ("default", "reports") for s in STATES}
    assert {key: n for key, n in snapshot.jobs.items() if n} == {
        ("default", JobState.PROCESSING): 1,
        ("reports", JobState.PENDING): 2,
    }
    assert {status: n for status, n in snapshot.workers.items() if n} == {
        WorkerStatus.BUSY: 1,
        WorkerStatus.STOPPING: 1,
        WorkerStatus.STOPPED: 1,
    }


def test_oldest_waiting_is_the_longest_due_job_of_any_queue(store: Store) -> None:
    store.enqueue(spec(id="later", priority=9, run_at="2030-01-01T00:00:00Z"), 3, NOW)
    assert store.metrics(NOW).oldest_waiting_ms is None  # scheduled for later: not waiting
    store.enqueue(spec(id="old", queue="reports"), 3, NOW - 20_000)
    store.enqueue(spec(id="new"), 3, NOW - 5_000)
    assert store.metrics(NOW).oldest_waiting_ms == 20_000
    assert claim(store, now=NOW).id == "old"  # the reports queue has nothing waiting now
    assert store.metrics(NOW).oldest_waiting_ms == 5_000


def test_attempts_retries_and_dead_letters_move_with_claims_and_settles(store: Store) -> None:
    store.enqueue(spec(id="flaky", max_retries=1), 3, NOW)
    now = NOW
    for _ in range(2):  # fails, is retried, fails again: dead
        result = settle(store, claim(store, now=now), Outcome.FAILED, now=now + 10, exit_code=1)
        now = result.run_at or now + 10
    assert store.get("flaky").state is JobState.DEAD
    store.enqueue(spec(id="fine", queue="reports"), 3, now)
    settle(store, claim(store, now=now), now=now + 10)
    snapshot = store.metrics(now)
    assert snapshot.attempts == {
        ("default", Outcome.FAILED): 2,
        ("reports", Outcome.COMPLETED): 1,
    }
    assert (snapshot.retries, snapshot.dead_lettered, snapshot.late_results) == (1, 1, 0)
    assert snapshot.jobs[("default", JobState.DEAD)] == 1


def test_a_result_fenced_out_after_recovery_counts_as_late(store: Store) -> None:
    register(store, "w1")
    store.enqueue(spec(id="a"), 3, NOW)
    job = claim(store)
    store.recover_orphans(["w1"], POLICY, NOW + 100)
    assert settle(store, job).state is None  # its job was recovered meanwhile
    assert settle(store, job).state is None
    snapshot = store.metrics(NOW + 2000)
    assert snapshot.late_results == 2
    assert snapshot.attempts == {("default", Outcome.LOST): 1}
    assert snapshot.workers[WorkerStatus.LOST] == 1


def test_refused_submissions_are_counted(store: Store) -> None:
    full = Admission(max_depth=1)
    results = store.submit([spec(id="a"), spec(id="b"), spec(id="c")], 3, NOW, full)
    assert [r.status.value for r in results] == ["created", "rejected", "rejected"]
    store.submit([spec(id="d")], 3, NOW, full)
    assert store.metrics(NOW).admission_rejected == 3


def test_histograms_count_each_attempt_in_the_bucket_its_times_fall_in(store: Store) -> None:
    store.enqueue_many([spec(id=name) for name in ("a", "b", "c", "d")], 3, NOW)
    # (claimed after it was due, ran for) in ms: a bound itself falls in its own bucket.
    for waited, ran in ((30, 700), (250, 5), (4_000_000, 3)):
        job = claim(store, now=NOW + waited)
        settle(store, job, now=NOW + waited + ran)
    cancelled = claim(store, now=NOW + 10)  # cancelled runs are left out
    store.cancel([cancelled.id], NOW + 11, None)
    settle(store, cancelled, Outcome.CANCELLED, now=NOW + 20, exit_code=None)
    snapshot = store.metrics(NOW)
    assert snapshot.queue_wait == Histogram(
        BOUNDS, _buckets(le50=1, le250=1, inf=1), 30 + 250 + 4_000_000, 3
    )
    assert snapshot.run_time == Histogram(BOUNDS, _buckets(le5=2, le1000=1), 708, 3)


def test_counters_survive_reopening_the_store(backend: str, tmp_path: Path) -> None:
    first = open_backend(backend, tmp_path)
    try:
        first.enqueue(spec(id="a", max_retries=0), 3, NOW)
        job = claim(first)
        first.recover_orphans(["w1"], POLICY, NOW + 100)  # lost, no retries left: dead
        settle(first, job)
        first.submit([spec(id="b"), spec(id="c")], 3, NOW, Admission(max_depth=0))
        before = first.metrics(NOW)
    finally:
        first.close()
    again = open_backend(backend, tmp_path)
    try:
        after = again.metrics(NOW)
    finally:
        again.close()
    assert (after.dead_lettered, after.late_results, after.admission_rejected) == (1, 1, 2)
    assert after.attempts == {("default", Outcome.LOST): 1} and after.run_time.count == 1
    assert after == before


@pytest.mark.sqlite_only
def test_the_snapshot_costs_the_same_at_any_number_of_jobs(tmp_path: Path) -> None:
    costs = []
    for jobs in (100, 20_000):
        path = tmp_path / f"{jobs}.db"
        enqueue_jobs(path, jobs)
        complete_all(path)  # one completed attempt each
        with open_store(path) as store:
            store.enqueue_many([spec(priority=n % 3) for n in range(50)], 3, NOW)
            assert store.metrics(NOW).run_time.count == jobs
        with sqlite_file(path) as conn:
            conn.execute("BEGIN")
            costs.append(sqlite_steps(conn, lambda: sqlite_metrics.read(conn, NOW)))
    few, many = costs
    assert many <= few + 2, costs


# -- the Prometheus text -------------------------------------------------------------------------
def _snapshot(**changes: Any) -> MetricsSnapshot:
    fields: dict[str, Any] = {
        "jobs": {
            ("default", JobState.PENDING): 2,
            ("default", JobState.PROCESSING): 9,
            ("default", JobState.DEAD): 1,
            ("reports", JobState.FAILED): 3,
            ("reports", JobState.DEAD): 2,
        },
        "workers": {
            WorkerStatus.IDLE: 2,
            WorkerStatus.BUSY: 1,
            WorkerStatus.STOPPING: 1,
            WorkerStatus.STOPPED: 5,
            WorkerStatus.LOST: 0,
        },
        "oldest_waiting_ms": 1500,
        "attempts": {
            ("default", Outcome.COMPLETED): 10,
            ("default", Outcome.FAILED): 2,
            ("default", Outcome.CANCELLED): 7,
            ("reports", Outcome.TIMEOUT): 1,
            ("reports", Outcome.LOST): 1,
        },
        "retries": 3,
        "dead_lettered": 4,
        "late_results": 2,
        "admission_rejected": 6,
        "queue_wait": Histogram((5, 1000), (1, 2, 1), 10, 4),
        "run_time": Histogram((5, 1000), (0, 3, 0), 1000, 3),
        "queues": frozenset({"default", "reports"}),
    }
    fields.update(changes)
    return MetricsSnapshot(**fields)


def _samples(text: bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text.decode("utf-8"))
        for sample in family.samples
    }


def _at(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


def test_the_text_holds_every_family_with_its_type_and_nothing_else() -> None:
    families = {
        f.name: f.type
        for f in text_string_to_metric_families(metrics.prometheus_text(_snapshot()).decode())
    }
    assert families == {
        "queuectl_jobs": "gauge",
        "queuectl_workers": "gauge",
        "queuectl_oldest_waiting_seconds": "gauge",
        "queuectl_attempts": "counter",
        "queuectl_retries": "counter",
        "queuectl_dead_lettered": "counter",
        "queuectl_admission_rejected": "counter",
        "queuectl_recovered": "counter",
        "queuectl_late_results": "counter",
        "queuectl_queue_wait_seconds": "histogram",
        "queuectl_run_time_seconds": "histogram",
    }  # no process or platform metrics


def test_the_text_holds_the_snapshot_figures() -> None:
    samples = _samples(metrics.prometheus_text(_snapshot()))
    expected = {
        _at("queuectl_jobs", queue="default", state="pending"): 2,
        _at("queuectl_jobs", queue="reports", state="dead"): 2,
        _at("queuectl_workers", status="idle"): 2,
        _at("queuectl_workers", status="lost"): 0,
        _at("queuectl_oldest_waiting_seconds"): 1.5,
        _at("queuectl_attempts_total", queue="default", outcome="completed"): 10,
        _at("queuectl_attempts_total", queue="reports", outcome="timeout"): 1,
        _at("queuectl_retries_total"): 3,
        _at("queuectl_dead_lettered_total"): 4,
        _at("queuectl_admission_rejected_total"): 6,
        _at("queuectl_recovered_total"): 1,
        _at("queuectl_late_results_total"): 2,
    }
    assert {key: samples.get(key) for key in expected} == expected
    assert len([key for key in samples if key[0] == "queuectl_jobs"]) == 5
    assert len([key for key in samples if key[0] == "queuectl_workers"]) == 5


def test_histograms_are_cumulative_in_seconds_with_inf_last() -> None:
    samples = _samples(metrics.prometheus_text(_snapshot()))
    wait = {
        dict(labels)["le"]: value
        for (name, labels), value in samples.items()
        if name == "queuectl_queue_wait_seconds_bucket"
    }
    assert wait == {"0.005": 1, "1.0": 3, "+Inf": 4}
    assert samples[_at("queuectl_queue_wait_seconds_sum")] == 0.01
    assert samples[_at("queuectl_queue_wait_seconds_count")] == 4
    assert samples[_at("queuectl_run_time_seconds_bucket", le="+Inf")] == 3
    assert samples[_at("queuectl_run_time_seconds_sum")] == 1.0
    text = metrics.prometheus_text(_snapshot()).decode()
    buckets = [line for line in text.splitlines() if "queuectl_run_time_seconds_bucket" in line]
    assert buckets[-1].startswith('queuectl_run_time_seconds_bucket{le="+Inf"}')


def test_labels_name_only_queues_states_statuses_and_outcomes() -> None:
    samples = _samples(metrics.prometheus_text(_snapshot()))
    names = {label for _, labels in samples for label, _ in labels}
    assert names == {"queue", "state", "status", "outcome", "le"}


def test_no_job_waiting_reads_as_zero_seconds() -> None:
    samples = _samples(metrics.prometheus_text(_snapshot(oldest_waiting_ms=None)))
    assert samples[_at("queuectl_oldest_waiting_seconds")] == 0


def test_the_text_comes_from_a_registry_of_its_own() -> None:
    from prometheus_client import REGISTRY, exposition

    first = metrics.prometheus_text(_snapshot())
    assert metrics.prometheus_text(_snapshot()) == first  # nothing kept between calls
    assert not any(f.name.startswith("queuectl_") for f in REGISTRY.collect())
    plain = getattr(exposition, "CONTENT_TYPE_PLAIN_0_0_4", exposition.CONTENT_TYPE_LATEST)
    assert plain == metrics.PROMETHEUS_CONTENT_TYPE


def test_commands_that_do_not_render_never_import_prometheus_client() -> None:
    probe = "import sys, queuectl_tui.cli.app; print('prometheus_client' in sys.modules)"
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert found.stdout.strip() == "False"


# -- the summary ---------------------------------------------------------------------------------
def test_the_summary_has_exactly_the_reference_keys_and_figures() -> None:
    assert metrics.summary(_snapshot()) == {
        "active_workers": 4,  # idle, busy and stopping
        "avg_execution_ms": 333.3,
        "avg_time_in_queue_ms": 2.5,
        "dead_letter_count": 3,  # dead jobs now, every queue
        "failure_count": 4,  # failed, timeout and lost attempts; not cancelled ones
        "queue_depth": 5,  # pending and failed jobs now
        "retry_count": 3,
        "success_count": 10,
    }


def test_an_empty_summary_is_all_zeros_and_numbers_only() -> None:
    empty = MetricsSnapshot({}, {}, None, {}, 0, 0, 0, 0, Histogram((), (0,), 0, 0),
                            Histogram((), (0,), 0, 0))  # fmt: skip
    figures = metrics.summary(empty)
    assert set(figures) == SUMMARY_KEYS and set(figures.values()) == {0}
    assert all(type(value) in (int, float) for value in figures.values())


# -- the command ---------------------------------------------------------------------------------
def test_the_command_prints_the_text_and_the_summary(run_cli: RunCli, db_path: Path) -> None:
    with open_store(db_path) as store:
        store.enqueue_many([spec(id="a"), spec(id="b")], 3, NOW)
        settle(store, claim(store, now=NOW + 40), now=NOW + 1040)
    text = run_cli("metrics")
    assert text.returncode == 0, text.stderr
    samples = _samples(text.stdout.encode())
    assert samples[_at("queuectl_jobs", queue="default", state="pending")] == 1
    assert samples[_at("queuectl_attempts_total", queue="default", outcome="completed")] == 1
    assert samples[_at("queuectl_run_time_seconds_bucket", le="1.0")] == 1
    figures = json.loads(run_cli("metrics", "--json").stdout)
    assert figures == {
        "active_workers": 1,
        "avg_execution_ms": 1000.0,
        "avg_time_in_queue_ms": 40.0,
        "dead_letter_count": 0,
        "failure_count": 0,
        "queue_depth": 1,
        "retry_count": 0,
        "success_count": 1,
    }


def test_the_command_reads_a_missing_database_as_empty_and_creates_none(
    run_cli: RunCli, db_path: Path
) -> None:
    text = run_cli("metrics")
    assert text.returncode == 0 and text.stderr == ""
    assert _samples(text.stdout.encode())[_at("queuectl_retries_total")] == 0
    figures = json.loads(run_cli("metrics", "--json").stdout)
    assert set(figures) == SUMMARY_KEYS and set(figures.values()) == {0}
    assert not db_path.exists()


def test_a_bad_flag_is_a_usage_error(run_cli: RunCli) -> None:
    bad = run_cli("metrics", "--bogus")
    assert bad.returncode == 2 and bad.stdout == ""
    errors = [line for line in bad.stderr.splitlines() if line.startswith("Error")]
    assert errors == ["Error: No such option: --bogus"] and "Traceback" not in bad.stderr
