"""Random sequences of queue operations keep the store's invariants, for every backend."""

from __future__ import annotations

import tempfile
import unittest
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from store_helpers import sqlite_file

from queuectl_tui.lifecycle import RetryPolicy
from queuectl_tui.models import Job, JobState, Outcome, Worker, WorkerStatus
from queuectl_tui.store import ClaimRequest, Settlement, SQLiteStore

from helpers import (
    BACKENDS,
    REQUIRE_POSTGRES,
    drop_test_schemas,
    open_backend,
    postgres_available,
    spec,
)

POLICY = RetryPolicy(2.0, 60.0)

# What a pool records; UNKNOWN is only ever read.
RECORDED_OUTCOMES = [outcome for outcome in Outcome if outcome is not Outcome.UNKNOWN]

WORKERS = ("w1", "w2", "w3")


class QueueMachine(RuleBasedStateMachine):
    backend = BACKENDS[0]  # set per backend below

    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.TemporaryDirectory()
        self.store = open_backend(self.backend, Path(self.folder.name))
        self.now = 1_800_000_000_000
        self.next_id = 0
        self.held: dict[str, Job] = {}  # job id -> the job as its worker claimed it
        self.runs_seen: dict[str, int] = {}
        self.stale: list[Job] = []  # claims whose worker was declared dead
        self.register(*WORKERS)

    def register(self, *ids: str) -> None:
        self.store.register_workers(
            [
                Worker(i, "p", 1, "h", WorkerStatus.IDLE, self.now, self.now, None, None, 0, 0)
                for i in ids
            ]
        )

    def teardown(self) -> None:
        self.store.close()
        self.folder.cleanup()
        if self.backend == "postgresql":
            drop_test_schemas()

    @rule(retries=st.integers(0, 2), priority=st.integers(-2, 2), count=st.integers(1, 3))
    def enqueue(self, retries: int, priority: int, count: int) -> None:
        batch = []
        for _ in range(count):
            self.next_id += 1
            batch.append(spec(id=f"j{self.next_id}", max_retries=retries, priority=priority))
        if count == 1:
            self.store.enqueue(batch[0], 3, self.now)
        else:
            self.store.enqueue_many(batch, 3, self.now)

    @rule(worker=st.sampled_from(WORKERS))
    def claim(self, worker: str) -> None:
        job = self.store.claim(worker, 1, self.now)
        if job is not None:
            assert job.id not in self.held, "a job was claimed twice"
            self.held[job.id] = job

    @precondition(lambda self: self.held)
    @rule(data=st.data(), outcome=st.sampled_from(RECORDED_OUTCOMES), next_job=st.booleans())
    def settle(self, data: st.DataObject, outcome: Outcome, next_job: bool) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.held)))
        job = self.held.pop(job_id)
        exchange = self.store.exchange(
            ClaimRequest(
                [Settlement(job, outcome, 0, "", None, self.now)],
                [job.worker_id or ""] if next_job else [],
                1,
                self.now,
                POLICY,
            )
        )
        result = exchange.settled[0]
        for claimed in exchange.claimed.values():
            assert claimed.id not in self.held
            self.held[claimed.id] = claimed
        if result.state is None:
            return
        expected = {
            Outcome.COMPLETED: {JobState.COMPLETED},
            Outcome.INTERRUPTED: {JobState.PENDING},
            Outcome.CANCELLED: {JobState.CANCELLED},
        }.get(outcome, {JobState.FAILED, JobState.DEAD})
        assert result.state in expected

    @rule(worker=st.sampled_from(WORKERS))
    def worker_dies(self, worker: str) -> None:
        recovered = self.store.recover_orphans([worker], POLICY, self.now)
        for job in recovered:
            assert job.state in (JobState.FAILED, JobState.DEAD)
        for job_id in [j for j, held in self.held.items() if held.worker_id == worker]:
            self.stale.append(self.held.pop(job_id))
        self.register(worker)  # the worker comes back under the same id

    @precondition(lambda self: self.stale)
    @rule(outcome=st.sampled_from(RECORDED_OUTCOMES))
    def late_result_is_fenced_out(self, outcome: Outcome) -> None:
        job = self.stale.pop()
        before = self.store.get(job.id)
        result = self.store.settle(Settlement(job, outcome, 0, "", None, self.now), POLICY)
        assert result.state is None
        assert self.store.get(job.id) == before

    @rule()
    def retry_all_dead(self) -> None:
        for job_id in self.store.retry_dead(None, self.now):
            assert self.store.get(job_id).state is JobState.PENDING

    @rule(ms=st.integers(1, 20_000))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @invariant()
    def counts_match_the_rows(self) -> None:
        actual = Counter(job.state for job in self.store.list_jobs(limit=10_000))
        assert {s: n for s, n in self.store.counts().items() if n} == dict(actual)

    @invariant()
    def attempt_totals_match_the_history(self) -> None:
        stats = self.store.stats(self.now)
        history = [
            attempt
            for job in self.store.list_jobs(limit=10_000)
            for attempt in self.store.attempts(job.id)
        ]
        failures = (Outcome.FAILED, Outcome.TIMEOUT, Outcome.LOST)
        assert (stats.attempts_total, stats.attempts_failed, stats.retries) == (
            len(history),
            sum(1 for attempt in history if attempt.outcome in failures),
            sum(1 for attempt in history if attempt.number > 1),
        )
        if not isinstance(self.store, SQLiteStore):
            return
        # SQLite keeps per-10-second counters by trigger: they match the history too.
        with sqlite_file(self.store.location) as conn:
            per_minute = conn.execute(
                "SELECT finished_at / 10000, sum(outcome = 'completed'), "
                "sum(outcome <> 'completed') FROM attempts "
                "WHERE outcome NOT IN ('cancelled', 'interrupted') GROUP BY 1 ORDER BY 1"
            ).fetchall()
            kept = conn.execute(
                "SELECT slot, completed, failed FROM attempt_rates ORDER BY slot"
            ).fetchall()
        assert kept == per_minute

    @invariant()
    def processing_iff_owned_and_attempts_bounded(self) -> None:
        for job in self.store.list_jobs(limit=10_000):
            assert (job.state is JobState.PROCESSING) == (job.worker_id is not None)
            assert 0 <= job.attempts <= job.max_retries + 1
            assert job.runs >= job.attempts
            assert job.runs >= self.runs_seen.get(job.id, 0), "runs went backwards"
            self.runs_seen[job.id] = job.runs
            if job.state is JobState.PROCESSING:
                held = self.held.get(job.id)
                assert held is not None and held.worker_id == job.worker_id

    @invariant()
    def attempt_history_matches_runs(self) -> None:
        for job in self.store.list_jobs(limit=10_000):
            finished = len(self.store.attempts(job.id))
            running = 1 if job.state is JobState.PROCESSING else 0
            assert finished + running == job.runs


# Each PostgreSQL example migrates a schema of its own (0.2 s): fewer of them.
EXAMPLES = {"sqlite": 60, "postgresql": 25}


def _machine_for(backend: str) -> type[unittest.TestCase]:
    machine: type[QueueMachine] = type(
        f"QueueMachine_{backend}", (QueueMachine,), {"backend": backend}
    )
    case = machine.TestCase
    case.settings = settings(
        max_examples=EXAMPLES.get(backend, 25),
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    missing = postgres_available() if backend == "postgresql" else None
    if missing is not None and not REQUIRE_POSTGRES:
        return unittest.skip(missing)(case)  # type: ignore[no-any-return]
    return case


for _backend in BACKENDS:
    globals()[f"TestQueueInvariants_{_backend}"] = _machine_for(_backend)
