"""The store contract for an operator's control: named queues (pause, limits, the pool's own
queues), cancel, retry now, delete, prune and the audit trail. Runs against every backend."""

from __future__ import annotations

from store_helpers import NOW, POLICY, claim, register, settle

from queuectl_tui.models import Action, JobState, Outcome
from queuectl_tui.store import ClaimRequest, Store

from helpers import spec

WHO = Action("cli", "alice", "laptop", "test", "subject")


def test_jobs_go_to_their_queue_and_are_counted_per_queue(store: Store) -> None:
    store.enqueue(spec(id="a", queue="reports"), 3, NOW)
    store.enqueue_many([spec(id="b"), spec(id="c", queue="reports")], 3, NOW)
    store.enqueue_many([spec(id="d")], 3, NOW)
    assert store.get("a").queue == "reports" and store.get("b").queue == "default"
    assert store.counts("reports")[JobState.PENDING] == 2
    assert store.counts("default")[JobState.PENDING] == 2
    assert store.counts()[JobState.PENDING] == 4
    assert [job.id for job in store.list_jobs(queue="reports")] == ["a", "c"]
    names = {queue.name: queue.waiting for queue in store.queues(NOW)}
    assert names == {"default": 2, "reports": 2}


def test_a_pool_claims_only_from_the_queues_it_serves(store: Store) -> None:
    store.enqueue(spec(id="report", queue="reports", priority=9), 3, NOW)
    store.enqueue(spec(id="mail", queue="emails"), 3, NOW)
    register(store, "w1", "w2")
    exchange = store.exchange(ClaimRequest([], ["w1", "w2"], 1, NOW, POLICY, ("emails",)))
    assert [job.id for job in exchange.claimed.values()] == ["mail"]
    assert store.has_due_work(NOW, ("reports",)) and not store.has_due_work(NOW, ("emails",))


def test_the_best_job_is_taken_across_queues(store: Store) -> None:
    store.enqueue(spec(id="low", queue="a", priority=1), 3, NOW)
    store.enqueue(spec(id="high", queue="b", priority=5), 3, NOW)
    store.enqueue(spec(id="mid", queue="c", priority=3), 3, NOW)
    assert [claim(store, f"w{i}").id for i in range(3)] == ["high", "mid", "low"]


def test_a_paused_queue_is_not_claimed_until_resumed(store: Store) -> None:
    store.enqueue(spec(id="held", queue="reports", priority=9), 3, NOW)
    store.enqueue(spec(id="other"), 3, NOW)
    store.set_queue_paused("reports", True, NOW, WHO)
    assert claim(store, "w1").id == "other"
    assert claim(store, "w2") is None
    assert not store.has_due_work(NOW)
    [paused] = [queue for queue in store.queues(NOW) if queue.name == "reports"]
    assert paused.paused and paused.waiting == 1
    store.set_queue_paused("reports", False, NOW, WHO)
    assert claim(store, "w2").id == "held"


def test_a_queue_limit_holds_across_claims(store: Store) -> None:
    store.enqueue_many([spec(id=f"r{i}", queue="reports") for i in range(3)], 3, NOW)
    store.enqueue(spec(id="other", priority=-1), 3, NOW)
    store.set_queue_limit("reports", 1, NOW, WHO)
    register(store, "w1", "w2", "w3")
    exchange = store.exchange(ClaimRequest([], ["w1", "w2", "w3"], 1, NOW, POLICY))
    assert sorted(job.id for job in exchange.claimed.values()) == ["other", "r0"]
    running = exchange.claimed["w1"]
    settle(store, running)
    assert claim(store, "w2").id == "r1"  # room again once one finished
    store.set_queue_limit("reports", None, NOW, WHO)
    assert claim(store, "w3").id == "r2"


def test_cancel_ends_waiting_jobs_and_asks_for_running_ones(store: Store) -> None:
    store.enqueue_many([spec(id="done"), spec(id="running"), spec(id="waiting")], 3, NOW)
    done = claim(store, "w0")
    settle(store, done)
    running = claim(store, "w1")
    assert running.id == "running"
    result = store.cancel(["waiting", "running", "done", "ghost"], NOW + 5, WHO)
    assert (result.cancelled, result.requested) == (["waiting"], ["running"])
    assert store.get("waiting").state is JobState.CANCELLED
    assert store.get("done").state is JobState.COMPLETED  # finished: left alone
    assert store.cancel_requested(["running", "waiting"]) == ["running"]
    # The pool stops the run: recorded cancelled, and the job is not retried.
    after = settle(store, running, Outcome.CANCELLED, exit_code=-15)
    assert after.state is JobState.CANCELLED
    assert [a.outcome for a in store.attempts("running")] == [Outcome.CANCELLED]


def test_a_run_that_fails_after_a_cancel_request_is_not_retried(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=5), 3, NOW)
    job = claim(store)
    store.cancel(["a"], NOW + 1, WHO)
    assert settle(store, job, Outcome.FAILED, exit_code=1).state is JobState.CANCELLED
    store.enqueue(spec(id="b", max_retries=5), 3, NOW)
    claim(store, "w9")
    store.cancel(["b"], NOW + 1, WHO)
    [recovered] = store.recover_orphans(["w9"], POLICY, NOW + 2)
    assert recovered.state is JobState.CANCELLED


def test_retry_sends_cancelled_and_dead_back_and_makes_failed_ready_now(store: Store) -> None:
    store.enqueue_many([spec(id="x"), spec(id="dead", max_retries=0), spec(id="f")], 3, NOW)
    store.cancel(["x"], NOW, WHO)
    settle(store, claim(store, "w1"), Outcome.FAILED, exit_code=1)  # dead: no retries
    failed = claim(store, "w2")
    result = settle(store, failed, Outcome.FAILED, exit_code=1, now=NOW + 10)
    assert result.state is JobState.FAILED and result.run_at > NOW + 10
    retried = store.retry(["x", "dead", "f", "ghost"], NOW + 20, WHO)
    assert sorted(retried.fresh) == ["dead", "x"] and retried.ready == ["f"]
    assert store.get("f").run_at == NOW + 20 and store.get("f").attempts == 1  # kept
    assert store.get("dead").state is JobState.PENDING and store.get("dead").attempts == 0


def test_delete_removes_jobs_with_their_attempts_but_never_a_running_one(store: Store) -> None:
    store.enqueue_many([spec(id="old"), spec(id="busy")], 3, NOW)
    settle(store, claim(store, "w1"))
    claim(store, "w2")
    assert store.delete(["old", "busy"], NOW, WHO) == ["old"]
    assert store.get("old") is None and store.attempts("old") == []
    assert store.get("busy").state is JobState.PROCESSING
    assert store.counts()[JobState.COMPLETED] == 0


def test_prune_removes_only_old_finished_jobs_in_batches(store: Store) -> None:
    store.enqueue_many([spec(id=f"j{i}") for i in range(5)], 3, NOW)
    for i in range(4):
        settle(store, claim(store, f"w{i}"), now=NOW + i)
    assert store.count_prunable(JobState.COMPLETED, NOW + 3) == 3
    assert store.prune(JobState.COMPLETED, NOW + 3, 2) == 2  # the oldest first
    assert store.get("j0") is None and store.get("j1") is None and store.get("j2") is not None
    assert store.prune(JobState.COMPLETED, NOW + 3, 2) == 1
    assert store.prune(JobState.COMPLETED, NOW + 3, 2) == 0
    assert store.get("j4").state is JobState.PENDING


def test_every_action_leaves_an_audit_line(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    store.cancel(["a"], NOW, Action("console", "bob", "box", "cancel", "a"))
    store.retry(["a"], NOW + 1, Action("cli", "alice", "laptop", "retry", "a"))
    store.set_queue_paused(
        "default", True, NOW + 2, Action("http", "ops-token", "-", "pause", "default")
    )
    store.record_action(Action("cli", "alice", "laptop", "prune", "state=completed"), 7, NOW + 3)
    entries = store.actions()
    assert [(e.face, e.actor, e.action, e.touched) for e in entries] == [
        ("cli", "alice", "prune", 7),
        ("http", "ops-token", "pause", 1),
        ("cli", "alice", "retry", 1),
        ("console", "bob", "cancel", 1),
    ]
    assert [e.action for e in store.actions(limit=2, before_id=entries[1].id)] == [
        "retry",
        "cancel",
    ]


def test_a_delete_by_filter_spares_a_job_that_left_the_state_meanwhile(store: Store) -> None:
    store.enqueue_many([spec(id="a", max_retries=0), spec(id="b", max_retries=0)], 3, NOW)
    for worker in ("w1", "w2"):
        settle(store, claim(store, worker), Outcome.FAILED, exit_code=1)  # both dead
    listed = [job.id for job in store.list_jobs(JobState.DEAD)]
    store.retry_dead(["a"], NOW + 5)  # retried between the listing and the delete
    assert store.delete(listed, NOW + 6, WHO, JobState.DEAD) == ["b"]
    assert store.get("a").state is JobState.PENDING
