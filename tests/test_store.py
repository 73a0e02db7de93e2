"""The store contract: transitions, claim order, fencing, recovery, counts, paging. Every test
here runs against each backend (the `store` fixture); SQLite's own checks (its files, schema
and query plans) are in test_sqlite_store.py."""

from __future__ import annotations

import pytest
from store_helpers import NOW, POLICY, claim, register, settle, settle_and_claim

from queuectl_tui.lifecycle import RetryPolicy
from queuectl_tui.models import Action, Job, JobState, Outcome, StopKind, Worker, WorkerStatus
from queuectl_tui.store import (
    Admission,
    ClaimRequest,
    DuplicateJobError,
    Settlement,
    Store,
    Submitted,
)

from helpers import spec


def test_enqueue_stores_a_pending_job(store: Store) -> None:
    result = store.enqueue(spec(id="a", command="echo hi", priority=3), 3, NOW)
    assert result.created
    job = store.get("a")
    assert job is not None and job == result.job
    assert (job.state, job.priority, job.max_retries, job.attempts) == (JobState.PENDING, 3, 3, 0)
    assert job.run_at == job.created_at == NOW
    assert store.counts()[JobState.PENDING] == 1


def test_duplicate_id_is_refused_and_the_original_kept(store: Store) -> None:
    store.enqueue(spec(id="a", command="first"), 3, NOW)
    with pytest.raises(DuplicateJobError):
        store.enqueue(spec(id="a", command="second"), 3, NOW)
    assert store.get("a").command == "first"
    assert store.counts()[JobState.PENDING] == 1


def test_idempotency_key_returns_the_existing_job(store: Store) -> None:
    first = store.enqueue(spec(id="a", idempotency_key="k"), 3, NOW)
    again = store.enqueue(spec(id="b", idempotency_key="k"), 3, NOW)
    assert not again.created and again.job.id == "a" == first.job.id
    assert store.get("b") is None
    assert store.counts()[JobState.PENDING] == 1


def test_bulk_enqueue_is_all_or_nothing(store: Store) -> None:
    store.enqueue(spec(id="taken"), 3, NOW)
    batch = [spec(id=f"j{i}") for i in range(50)] + [spec(id="taken")]
    with pytest.raises(DuplicateJobError) as raised:
        store.enqueue_many(batch, 3, NOW)
    assert raised.value.job_id == "taken"
    assert store.get("j0") is None
    assert store.counts()[JobState.PENDING] == 1


def test_bulk_enqueue_skips_known_idempotency_keys(store: Store) -> None:
    store.enqueue(spec(id="a", idempotency_key="k"), 3, NOW)
    result = store.enqueue_many(
        [spec(id="b", idempotency_key="k"), spec(id="c", max_retries=7, timeout=2.5)], 3, NOW
    )
    assert (result.created, result.existing) == (1, 1)
    c = store.get("c")
    assert c.max_retries == 7 and c.timeout == 2.5
    assert store.counts()[JobState.PENDING] == 2


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"priority": -3},
        {"run_at": "2030-01-01T00:00:00Z"},
        {"max_retries": 0},
        {"timeout": 1.5},
        {"idempotency_key": "key-1"},
        {"priority": 9, "max_retries": 4, "timeout": 60, "idempotency_key": "key-2"},
    ],
)
def test_bulk_enqueue_stores_every_field_whatever_the_batch_sets(
    store: Store, fields: dict[str, object]
) -> None:
    """A batch sends only the fields some of its jobs set; the others must get defaults."""
    plain, custom = spec(id="plain"), spec(id="custom", **fields)
    store.enqueue_many([plain, custom], 3, NOW)
    for wanted in (plain, custom):
        job = store.get(wanted.id)
        assert job is not None
        assert (job.priority, job.max_retries, job.timeout, job.idempotency_key) == (
            wanted.priority,
            3 if wanted.max_retries is None else wanted.max_retries,
            wanted.timeout,
            wanted.idempotency_key,
        )
        assert job.run_at == (NOW if wanted.run_at is None else wanted.run_at)
        assert (job.created_at, job.attempts, job.state) == (NOW, 0, JobState.PENDING)


def test_claim_order_is_priority_then_run_at_then_creation(store: Store) -> None:
    store.enqueue(spec(id="low"), 3, NOW)
    store.enqueue(spec(id="late", priority=5, run_at="2030-01-01T00:00:00Z"), 3, NOW)
    store.enqueue(spec(id="high-b", priority=5), 3, NOW + 2)
    store.enqueue(spec(id="high-a", priority=5), 3, NOW + 1)
    store.enqueue(spec(id="high-c", priority=5), 3, NOW + 1)
    order = [claim(store, now=NOW + 10).id for _ in range(4)]
    assert order == ["high-a", "high-c", "high-b", "low"]
    assert claim(store, now=NOW + 10) is None  # "late" is not due yet


def test_claim_marks_processing_with_owner(store: Store) -> None:
    register(store, "w1")
    store.enqueue(spec(id="a"), 3, NOW)
    job = claim(store, now=NOW + 5)
    assert job.state is JobState.PROCESSING
    assert (job.worker_id, job.worker_pid, job.claimed_at, job.attempts) == ("w1", 4242, NOW + 5, 1)
    worker = store.list_workers()[0]
    assert (worker.status, worker.current_job) == (WorkerStatus.BUSY, "a")
    assert claim(store, "w2") is None


def test_complete(store: Store) -> None:
    register(store, "w1")
    store.enqueue(spec(id="a"), 3, NOW)
    job = claim(store)
    result = settle(store, job, output="hello\n")
    assert result.state is JobState.COMPLETED
    done = store.get("a")
    assert done.state is JobState.COMPLETED and done.worker_id is None and done.exit_code == 0
    [attempt] = store.attempts("a")
    assert (attempt.number, attempt.outcome, attempt.output) == (1, Outcome.COMPLETED, "hello\n")
    assert (attempt.started_at, attempt.finished_at) == (NOW, NOW + 1000)
    worker = store.list_workers()[0]
    assert (worker.status, worker.current_job, worker.jobs_done) == (WorkerStatus.IDLE, None, 1)


def test_failure_schedules_retry_with_exponential_backoff_then_dead(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=2), 3, NOW)
    now = NOW
    expected_delays = [2_000, 4_000]
    for delay in expected_delays:
        job = claim(store, now=now)
        result = settle(store, job, Outcome.FAILED, now=now + 10, exit_code=1, error="boom")
        assert result.state is JobState.FAILED
        assert result.run_at == now + 10 + delay
        assert claim(store, now=result.run_at - 1) is None  # not before its run_at
        now = result.run_at
    job = claim(store, now=now)
    assert job.attempts == 3
    result = settle(store, job, Outcome.TIMEOUT, now=now + 10, exit_code=None)
    assert result.state is JobState.DEAD
    dead = store.get("a")
    assert dead.state is JobState.DEAD and dead.attempts == 3 and dead.runs == 3
    outcomes = [a.outcome for a in store.attempts("a")]
    assert outcomes == [Outcome.FAILED, Outcome.FAILED, Outcome.TIMEOUT]


def test_backoff_is_capped(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=100), 3, NOW)
    now = NOW
    for _ in range(20):
        job = claim(store, now=now)
        result = store.settle(
            Settlement(job, Outcome.FAILED, 1, "", None, now), RetryPolicy(10.0, 60.0)
        )
        assert result.run_at - now <= 60_000
        now = result.run_at


def test_max_retries_zero_goes_straight_to_dead(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=0), 3, NOW)
    assert settle(store, claim(store), Outcome.FAILED, exit_code=1).state is JobState.DEAD


def test_settle_is_fenced_by_owner_and_run(store: Store, backend: str) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    job = claim(store)
    impostor = type(job)(**{**_fields(job), "worker_id": "someone-else"})
    assert settle(store, impostor).state is None
    older = type(job)(**{**_fields(job), "runs": job.runs - 1})
    assert settle(store, older).state is None
    assert store.get("a").state is JobState.PROCESSING
    assert store.attempts("a") == []
    assert settle(store, job).state is JobState.COMPLETED
    # A second settle of the same run changes nothing. PostgreSQL, whose answer to the first
    # may have been lost on the way, says that it was recorded.
    again = settle(store, job).state
    assert again is (JobState.COMPLETED if backend == "postgresql" else None)
    assert len(store.attempts("a")) == 1


@pytest.mark.parametrize("outcome", [Outcome.COMPLETED, Outcome.FAILED, Outcome.LOST])
def test_late_result_after_recovery_changes_nothing(store: Store, outcome: Outcome) -> None:
    """Whatever the late result says, recovery's record of the lost run (an attempt of that
    run and worker, outcome lost) is not taken for the result's own."""
    register(store, "w1")
    store.enqueue(spec(id="a"), 3, NOW)
    job = claim(store)
    recovered = store.recover_orphans(["w1"], POLICY, NOW + 100)
    assert [j.id for j in recovered] == ["a"]
    assert recovered[0].state is JobState.FAILED
    before = store.get("a")
    assert settle(store, job, outcome).state is None
    assert store.get("a") == before


def test_recovery_counts_the_lost_attempt_and_ends_in_dead(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=1), 3, NOW)
    now = NOW
    for expected in (JobState.FAILED, JobState.DEAD):
        register(store, "w1", now=now)
        claim(store, now=now)
        [job] = store.recover_orphans(["w1"], POLICY, now + 1)
        assert job.state is expected
        now = job.run_at
    lost = store.attempts("a")
    assert [a.outcome for a in lost] == [Outcome.LOST, Outcome.LOST]
    assert "lost" in (lost[0].error or "")
    assert store.list_workers()[0].status is WorkerStatus.LOST


def test_recovery_leaves_jobs_of_live_workers_alone(store: Store) -> None:
    register(store, "alive", "dead")
    store.enqueue(spec(id="a"), 3, NOW)
    store.enqueue(spec(id="b"), 3, NOW)
    claim(store, "alive")
    claim(store, "dead")
    recovered = store.recover_orphans(["dead"], POLICY, NOW + 1)
    assert [j.id for j in recovered] == ["b"]
    assert store.get("a").state is JobState.PROCESSING


def test_a_worker_declared_lost_claims_nothing(store: Store) -> None:
    register(store, "w1")
    store.enqueue(spec(id="a"), 3, NOW)
    store.enqueue(spec(id="b"), 3, NOW)
    first = store.claim("w1", 1, NOW)
    store.recover_orphans(["w1"], POLICY, NOW + 1)  # another pool thinks it died
    assert store.claim("w1", 1, NOW + 2) is None
    late, next_job = settle_and_claim(store, first)
    assert late.state is None and next_job is None
    assert store.counts()[JobState.PROCESSING] == 0
    register(store, "w1", now=NOW + 3)  # its pool registers it again
    assert store.claim("w1", 1, NOW + 4) is not None


def test_an_unregistered_worker_claims_nothing(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    assert store.claim("stranger", 1, NOW) is None
    assert store.get("a").state is JobState.PENDING


def test_cancelled_run_returns_to_pending_without_spending_an_attempt(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=0), 3, NOW)
    job = claim(store)
    result = settle(store, job, Outcome.INTERRUPTED, exit_code=None)
    assert result.state is JobState.PENDING
    again = store.get("a")
    assert again.attempts == 0 and again.runs == 1 and again.run_at == NOW
    assert claim(store, now=NOW + 2000).attempts == 1


def test_one_exchange_settles_a_run_and_claims_the_next_job(store: Store) -> None:
    register(store, "w1")
    store.enqueue(spec(id="a"), 3, NOW)
    store.enqueue(spec(id="b"), 3, NOW)
    first = claim(store)
    result, next_job = settle_and_claim(store, first)
    assert result.state is JobState.COMPLETED
    assert next_job is not None and next_job.id == "b"
    assert next_job.worker_id == "w1"
    assert store.list_workers()[0].current_job == "b"


def test_dlq_retry_gives_a_fresh_budget_and_keeps_history(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=0), 3, NOW)
    store.enqueue(spec(id="b", max_retries=0), 3, NOW)
    store.enqueue(spec(id="c"), 3, NOW)
    for _ in range(2):
        settle(store, claim(store), Outcome.FAILED, exit_code=1)
    assert store.counts()[JobState.DEAD] == 2
    assert store.retry_dead(["a", "c", "nope"], NOW + 5000) == ["a"]
    job = store.get("a")
    assert (job.state, job.attempts, job.runs, job.run_at) == (JobState.PENDING, 0, 1, NOW + 5000)
    assert len(store.attempts("a")) == 1
    assert store.retry_dead(None, NOW + 6000) == ["b"]
    assert store.counts()[JobState.DEAD] == 0
    claimed = {job.id: job for job in (claim(store, now=NOW + 7000) for _ in range(3))}
    assert (claimed["a"].attempts, claimed["a"].runs) == (1, 2)


def test_counts_follow_every_transition(store: Store) -> None:
    store.enqueue_many([spec(id=f"j{i}", max_retries=0) for i in range(5)], 3, NOW)
    settle(store, claim(store), Outcome.COMPLETED)
    settle(store, claim(store), Outcome.FAILED, exit_code=1)
    claim(store)
    counts = store.counts()
    assert counts == {
        JobState.PENDING: 2,
        JobState.PROCESSING: 1,
        JobState.COMPLETED: 1,
        JobState.FAILED: 0,
        JobState.DEAD: 1,
        JobState.CANCELLED: 0,
        JobState.WAITING: 0,
    }
    queue = store.queue_counts()
    assert queue.total == 5 and queue.active_workers == 1  # w1, registered by claim()


def test_keyset_paging_and_filters(store: Store) -> None:
    store.enqueue_many([spec(id=f"job-{i:03d}", command=f"echo {i}") for i in range(25)], 3, NOW)
    first = store.list_jobs(limit=10)
    second = store.list_jobs(limit=10, after_seq=first[-1].seq)
    third = store.list_jobs(limit=10, after_seq=second[-1].seq)
    ids = [j.id for j in first + second + third]
    assert ids == [f"job-{i:03d}" for i in range(25)]
    newest = store.list_jobs(limit=3, newest_first=True)
    assert [j.id for j in newest] == ["job-024", "job-023", "job-022"]
    assert [j.id for j in store.list_jobs(search="echo 2")] == [
        "job-002",
        "job-020",
        "job-021",
        "job-022",
        "job-023",
        "job-024",
    ]
    assert store.list_jobs(search="100%") == []
    claim(store)
    assert [j.id for j in store.list_jobs(JobState.PROCESSING)] == ["job-000"]


def test_stats_report_throughput_and_latency(store: Store) -> None:
    store.enqueue_many([spec(id=f"j{i}") for i in range(4)], 3, NOW)
    for i in range(4):
        job = claim(store, now=NOW + 100 * (i + 1))
        outcome = Outcome.COMPLETED if i < 3 else Outcome.FAILED
        settle(store, job, outcome, now=NOW + 100 * (i + 1) + 50, exit_code=0 if i < 3 else 1)
    stats = store.stats(NOW + 1000)
    assert stats.completed_last_minute == 3 and stats.failed_last_minute == 1
    assert stats.attempts_total == 4 and stats.attempts_failed == 1
    assert stats.run_ms["p50"] == 50.0
    assert stats.wait_ms["avg"] == 250.0
    assert sum(stats.completed_per_minute) == 3


def test_stats_of_one_queue_count_only_its_jobs_and_runs(store: Store) -> None:
    store.enqueue_many([spec(id="r0", queue="reports", priority=9), spec(id="r1")], 3, NOW)
    store.enqueue_many([spec(id="m0", queue="mail", priority=5, max_retries=1)], 3, NOW)
    store.enqueue(spec(id="r2", queue="reports"), 3, NOW)
    runs = [
        ("r0", Outcome.COMPLETED, 40),
        ("m0", Outcome.FAILED, 70),
        ("m0", Outcome.COMPLETED, 90),
    ]
    now = NOW
    for job_id, outcome, took in runs:
        now += 10_000  # past any backoff
        job = claim(store, now=now)
        assert job.id == job_id  # by priority
        exit_code = 0 if outcome is Outcome.COMPLETED else 1
        settle(store, job, outcome, now=now + took, exit_code=exit_code)
    reports = store.stats(now + 1000, queue="reports")
    assert reports.queue == "reports" and reports.counts.by_state[JobState.PENDING] == 1
    assert (reports.attempts_total, reports.attempts_failed, reports.retries) == (1, 0, 0)
    assert reports.completed_last_minute == 1 and reports.failed_last_minute == 0
    assert (reports.sample_size, reports.run_ms["p50"]) == (1, 40.0)
    assert sum(reports.completed_per_minute) == 1
    mail = store.stats(now + 1000, queue="mail")
    assert (mail.attempts_total, mail.attempts_failed, mail.retries) == (2, 1, 1)
    assert (mail.completed_last_minute, mail.failed_last_minute, mail.sample_size) == (1, 1, 2)
    assert sum(mail.failed_per_minute) == 1
    assert store.throughput(now + 1000, queue="mail")[0][-1] == 1
    nothing = store.stats(now + 1000, queue="nowhere")
    assert (nothing.attempts_total, nothing.sample_size, nothing.counts.total) == (0, 0, 0)
    assert store.stats(now + 1000).attempts_total >= 3


def test_throughput_counts_each_minute_before_now_and_totals_never_go_down(
    store: Store,
) -> None:
    minute = 60_000
    start = (NOW // minute) * minute
    store.enqueue_many([spec(id=f"j{i}", max_retries=1) for i in range(5)], 3, start)
    finished = [start + 10, start + 20, start + minute + 5, start + 3 * minute, start + 3 * minute]
    outcomes = [Outcome.COMPLETED, Outcome.FAILED, Outcome.COMPLETED, Outcome.TIMEOUT]
    outcomes.append(Outcome.INTERRUPTED)  # an interrupted run is neither completed nor failed
    for at, outcome in zip(finished, outcomes, strict=True):
        job = claim(store, now=at - 1)
        settle(store, job, outcome, now=at, exit_code=0 if outcome is Outcome.COMPLETED else 1)
    completed, failed = store.throughput(start + 3 * minute + 30, minutes=4)
    assert completed == [1, 1, 0, 0] and failed == [1, 0, 0, 1]
    stats = store.stats(start + 3 * minute + 30)
    assert (stats.attempts_total, stats.attempts_failed, stats.retries) == (5, 2, 0)


def test_stop_requests(store: Store) -> None:
    assert store.stop_requested_since(NOW, "pool") is None
    store.request_stop(NOW + 10)
    assert store.stop_requested_since(NOW, "pool") is StopKind.GRACEFUL
    assert store.stop_requested_since(NOW + 11, "pool") is None


def test_a_stop_request_may_name_one_pool_and_force_it(store: Store) -> None:
    store.register_workers(
        [
            Worker(f"{pool}-{n}", pool, 4242, "host", WorkerStatus.IDLE, NOW, NOW, None, None, 0, 0)
            for pool in ("p1", "p2")
            for n in (1, 2)
        ]
    )
    baseline = store.register_workers([])
    asked = store.request_stop(NOW + 10, "p1", forced=True)
    assert sorted(w.id for w in asked) == ["p1-1", "p1-2"]
    assert store.stop_requested_after(baseline, "p1") is StopKind.FORCED
    assert store.stop_requested_after(baseline, "p2") is None
    assert store.stop_requested_since(NOW + 10, "p2") is None
    everyone = store.request_stop(NOW + 20)
    assert len(everyone) == 4
    assert store.stop_requested_after(baseline, "p2") is StopKind.GRACEFUL
    assert store.stop_requested_after(baseline, "p1") is StopKind.FORCED  # the strongest


def test_heartbeat_and_worker_status(store: Store) -> None:
    register(store, "w1", "w2")
    store.heartbeat(["w1"], NOW + 500)
    store.set_worker_status("w2", WorkerStatus.STOPPED, None, NOW + 600)
    workers = {w.id: w for w in store.list_workers()}
    assert workers["w1"].last_heartbeat == NOW + 500
    assert workers["w2"].status is WorkerStatus.STOPPED and workers["w2"].stopped_at == NOW + 600
    assert [w.id for w in store.list_workers(active_only=True)] == ["w1"]
    assert store.prune_workers(NOW + 601) == 1


def _fields(job) -> dict[str, object]:
    return {name: getattr(job, name) for name in job.__slots__}


def test_batches_are_one_transaction_even_when_the_input_fails_late(store: Store) -> None:
    def batches():
        yield [spec(id=f"a{i}") for i in range(100)]
        yield [spec(id=f"b{i}") for i in range(100)]
        raise ValueError("line 201: bad input")

    with pytest.raises(ValueError, match="line 201"):
        store.enqueue_batches(batches(), 3, NOW)
    assert store.counts()[JobState.PENDING] == 0
    assert store.list_jobs() == []
    result = store.enqueue_batches(iter([[spec(id="x")], [spec(id="y")]]), 3, NOW)
    assert (result.created, result.existing) == (2, 0)
    assert store.counts()[JobState.PENDING] == 2


def test_a_repeat_across_batches_names_the_id(store: Store) -> None:
    with pytest.raises(DuplicateJobError) as raised:
        store.enqueue_batches([[spec(id="same")], [spec(id="other"), spec(id="same")]], 3, NOW)
    assert raised.value.job_id == "same"
    assert store.list_jobs() == []


def test_a_stored_id_in_a_later_batch_is_the_one_named(store: Store) -> None:
    store.enqueue(spec(id="x"), 3, NOW)
    batches = [[spec(id=f"a{i}") for i in range(100)], [spec(id="b"), spec(id="x")]]
    with pytest.raises(DuplicateJobError) as raised:
        store.enqueue_batches(batches, 3, NOW)
    assert raised.value.job_id == "x"
    assert [job.id for job in store.list_jobs()] == ["x"]


def test_submissions_in_one_transaction_each_get_their_own_outcome(store: Store) -> None:
    store.enqueue(spec(id="taken"), 3, NOW)
    store.enqueue(spec(id="keyed", idempotency_key="k1"), 3, NOW)
    results = store.submit(
        [
            spec(id="new"),
            spec(id="replay", idempotency_key="k1"),
            spec(id="taken"),
            spec(id="twice", idempotency_key="k2"),
            spec(id="again", idempotency_key="k2"),
            spec(id="full"),
        ],
        3,
        NOW,
        Admission(max_depth=4),
    )
    assert [r.status for r in results] == [
        Submitted.CREATED,
        Submitted.EXISTING,
        Submitted.DUPLICATE_ID,
        Submitted.CREATED,
        Submitted.EXISTING,
        Submitted.REJECTED,
    ]
    assert results[1].job is not None and results[1].job.id == "keyed"
    assert results[4].job is not None and results[4].job.id == "twice"
    assert "already exists" in results[2].reason and "full" in results[5].reason
    assert store.counts()[JobState.PENDING] == 4
    assert store.get("full") is None and store.get("again") is None


def test_dead_letters_page_in_the_order_they_died(store: Store) -> None:
    store.enqueue_many([spec(id=i, max_retries=0) for i in "abcd"], 3, NOW)
    died = {"a": 300, "b": 100, "c": 300, "d": 200}  # a and c at the same instant
    for _ in died:
        job = claim(store)
        settle(store, job, Outcome.FAILED, now=NOW + died[job.id], exit_code=1)
    assert [j.id for j in store.list_jobs(JobState.DEAD)] == list("abcd")

    def pages(newest_first: bool) -> list[str]:
        seen: list[str] = []
        after = None
        while page := store.list_jobs(
            JobState.DEAD, limit=1, after_seq=after, newest_first=newest_first, by_end=True
        ):
            seen.append(page[0].id)
            after = page[0].seq
        return seen

    assert pages(newest_first=True) == ["c", "a", "d", "b"]
    assert pages(newest_first=False) == ["b", "d", "a", "c"]
    store.enqueue(spec(id="waiting"), 3, NOW)  # never ended: not in an order by end
    assert "waiting" not in [j.id for j in store.list_jobs(by_end=True)]


def test_a_job_s_directory_and_environment_are_kept_one_by_one_and_in_bulk(
    store: Store,
) -> None:
    store.enqueue(spec(id="one", cwd="/srv/a", env={"K": "V", "TOKEN": "t"}), 3, NOW)
    store.enqueue_many(
        [spec(id="plain"), spec(id="bulk", cwd="/srv/b", env={"X": "1"}), spec(id="p2")], 3, NOW
    )
    jobs = {job.id: job for job in store.list_jobs()}
    assert (jobs["one"].cwd, jobs["one"].environment) == ("/srv/a", {"K": "V", "TOKEN": "t"})
    assert (jobs["bulk"].cwd, jobs["bulk"].environment) == ("/srv/b", {"X": "1"})
    assert (jobs["plain"].cwd, jobs["plain"].env, jobs["p2"].cwd) == (None, None, None)
    assert jobs["one"].to_dict()["env"] == {"K": "V", "TOKEN": "********"}
    claimed = claim(store)
    assert claimed is not None and claimed.id == "one" and claimed.cwd == "/srv/a"


def test_an_order_by_end_leaves_out_jobs_that_have_not_ended(store: Store) -> None:
    store.enqueue_many([spec(id="again", max_retries=1), spec(id="done")], 3, NOW)
    settle(store, claim(store), Outcome.FAILED, now=NOW + 10, exit_code=1)  # failed: waits
    settle(store, claim(store, worker="w2"), now=NOW + 20)
    assert store.get("again").state is JobState.FAILED
    assert [j.id for j in store.list_jobs(by_end=True, newest_first=True)] == ["done"]


def test_an_exchange_says_whether_it_may_have_given_a_worker_work(store: Store) -> None:
    # An idle pool re-reads when the next job is due only after an exchange that says so.
    store.enqueue(spec(id="done"), 3, NOW)
    store.enqueue(spec(id="retried"), 3, NOW)
    store.enqueue(spec(id="limited", queue="reports"), 3, NOW)

    def record(job: Job, outcome: Outcome) -> bool:
        failed = outcome is not Outcome.COMPLETED
        ended = Settlement(job, outcome, 1 if failed else 0, "", "boom" if failed else None, NOW)
        return store.exchange(ClaimRequest([ended], [], 1, NOW + 1, POLICY)).made_work

    done, retried = claim(store, "w1"), claim(store, "w2")
    assert done is not None and retried is not None
    assert not record(done, Outcome.COMPLETED)  # nothing left to run
    assert record(retried, Outcome.FAILED)  # a retry, due after its backoff
    store.set_queue_limit("reports", 1, NOW, Action("cli", "t", "h", "limit", "reports"))
    limited = claim(store, "w3")
    assert limited is not None and limited.queue == "reports"
    assert record(limited, Outcome.COMPLETED)  # room in a queue with a limit
