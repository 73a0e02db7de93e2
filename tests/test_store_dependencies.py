"""Jobs that run after other jobs, on every backend: they wait, run once their parents have
completed, are cancelled (with the reason) when one ends otherwise, and come back when it is
retried; nothing is written for a job that names an unknown parent."""

from __future__ import annotations

import threading

import pytest
from store_helpers import NOW, POLICY, claim, register, settle

from queuectl_tui.lifecycle import DELETED
from queuectl_tui.models import JobSpecError, JobState, Outcome
from queuectl_tui.store import ClaimRequest, Settlement, Store
from queuectl_tui.store.dependencies import UnknownParent

from helpers import spec

W = JobState.WAITING
P = JobState.PENDING
C = JobState.CANCELLED


def states(store: Store, *ids: str) -> list[JobState | None]:
    return [(job.state if (job := store.get(i)) else None) for i in ids]


def run(store: Store, job_id: str, outcome: Outcome = Outcome.COMPLETED) -> None:
    """Claim `job_id` (the first due) and record its run."""
    job = claim(store, now=NOW + 10_000)
    assert job is not None and job.id == job_id, job
    settle(store, job, outcome, exit_code=0 if outcome is Outcome.COMPLETED else 1)


def test_a_job_waits_for_its_parent_and_runs_once_it_completed(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    child = store.enqueue(spec(id="b", after=["a"]), 3, NOW).job
    assert child.state is W
    assert store.counts()[W] == 1
    assert claim(store).id == "a"  # the waiting job is never claimed
    assert claim(store, "w2") is None
    settle(store, store.get("a"), Outcome.COMPLETED)
    assert states(store, "b") == [P]
    assert store.counts()[W] == 0 and store.counts()[P] == 1
    run(store, "b")


def test_a_job_after_several_runs_once_every_one_completed(store: Store) -> None:
    for parent in ("p1", "p2", "p3"):
        store.enqueue(spec(id=parent), 3, NOW)
    store.enqueue(spec(id="c", after=["p1", "p2", "p3"]), 3, NOW)
    run(store, "p1")
    run(store, "p2")
    assert states(store, "c") == [W]
    run(store, "p3")
    assert states(store, "c") == [P]
    links = store.job_links("c")
    assert [(link.id, link.ended) for link in links.parents] == [
        ("p1", "completed"),
        ("p2", "completed"),
        ("p3", "completed"),
    ]
    assert [link.id for link in store.job_links("p2").children] == ["c"]


def test_a_dead_parent_cancels_the_jobs_after_it_and_retrying_it_brings_them_back(
    store: Store,
) -> None:
    store.enqueue(spec(id="a", max_retries=0), 3, NOW)
    store.enqueue(spec(id="b", after=["a"]), 3, NOW)
    store.enqueue(spec(id="c", after=["b"]), 3, NOW)
    store.enqueue(spec(id="free"), 3, NOW)
    job = claim(store)
    assert job.id == "a"
    settle(store, job, Outcome.FAILED, exit_code=1)
    assert states(store, "a", "b", "c") == [JobState.DEAD, C, C]
    b, c = store.get("b"), store.get("c")
    assert (b.blocked_by, b.last_error) == ("a", "job 'a' it runs after ended dead")
    assert (c.blocked_by, c.last_error) == ("b", "job 'b' it runs after ended cancelled")
    assert b.finished_at is not None
    assert store.retry_dead(["a"], NOW + 2000) == ["a"]
    assert states(store, "a", "b", "c") == [P, W, W]
    assert store.get("b").last_error is None and store.get("b").blocked_by is None
    assert store.get("b").finished_at is None
    run(store, "free")  # due before the retried one
    run(store, "a")
    run(store, "b")
    run(store, "c")


def test_after_any_end_runs_whatever_the_parent_s_end(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=0), 3, NOW)
    store.enqueue(spec(id="cleanup", after=["a"], after_any_end=True), 3, NOW)
    store.enqueue(spec(id="strict", after=["a"]), 3, NOW)
    run(store, "a", Outcome.FAILED)
    assert states(store, "cleanup", "strict") == [P, C]


def test_an_unknown_parent_is_refused_and_nothing_is_written(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    before = store.counts()
    with pytest.raises(UnknownParent, match="cannot run after 'nope'"):
        store.enqueue(spec(id="b", after=["a", "nope"]), 3, NOW)
    assert store.get("b") is None
    assert store.counts() == before
    assert store.job_links("a").children == ()
    with pytest.raises(JobSpecError, match="after itself"):
        spec(id="x", after="x")


def test_a_parent_that_ended_already_decides_at_once(store: Store) -> None:
    store.enqueue(spec(id="ok"), 3, NOW)
    run(store, "ok")
    store.enqueue(spec(id="bad", max_retries=0), 3, NOW)
    run(store, "bad", Outcome.FAILED)
    assert store.enqueue(spec(id="after-ok", after=["ok"]), 3, NOW).job.state is P
    late = store.enqueue(spec(id="after-bad", after=["ok", "bad"]), 3, NOW).job
    assert (late.state, late.blocked_by) == (C, "bad")
    assert late.last_error == "job 'bad' it runs after ended dead"


def test_retrying_a_job_whose_parent_failed_is_refused_with_the_reason(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=0), 3, NOW)
    store.enqueue(spec(id="b", after=["a"]), 3, NOW)
    run(store, "a", Outcome.FAILED)
    result = store.retry(["b"], NOW + 5, None)
    assert result.fresh == [] and result.blocked["b"].endswith("ended dead: retry 'a' first")
    assert states(store, "b") == [C]
    result = store.retry(["a"], NOW + 6, None)
    assert result.fresh == ["a"]
    assert states(store, "a", "b") == [P, W]


def test_cancelling_a_waiting_job_cancels_what_runs_after_it_and_a_retry_undoes_it(
    store: Store,
) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    store.enqueue(spec(id="b", after=["a"]), 3, NOW)
    store.enqueue(spec(id="c", after=["b"]), 3, NOW)
    assert store.cancel(["b"], NOW + 1, None).cancelled == ["b"]
    assert states(store, "a", "b", "c") == [P, C, C]
    assert store.get("b").blocked_by is None  # the operator's own cancel
    assert store.get("c").blocked_by == "b"
    assert store.retry(["b"], NOW + 2, None).fresh == ["b"]
    assert states(store, "a", "b", "c") == [P, W, W]


def test_deleting_a_parent_cancels_what_waits_for_it(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    store.enqueue(spec(id="b", after=["a"]), 3, NOW)
    assert store.delete(["a"], NOW + 1, None) == ["a"]
    b = store.get("b")
    assert (b.state, b.blocked_by) == (C, "a")
    assert b.last_error == "job 'a' it runs after was deleted"
    assert [(link.id, link.state, link.ended) for link in store.job_links("b").parents] == [
        ("a", None, DELETED)
    ]


def test_a_pruned_parent_still_counts_as_completed(store: Store) -> None:
    store.enqueue(spec(id="p1"), 3, NOW)
    store.enqueue(spec(id="p2"), 3, NOW)
    store.enqueue(spec(id="c", after=["p1", "p2"]), 3, NOW)
    run(store, "p1")
    assert store.prune(JobState.COMPLETED, NOW + 10_000, 100) == 1
    assert store.get("p1") is None
    run(store, "p2")
    assert states(store, "c") == [P]


def test_a_batch_may_run_after_jobs_above_it_never_below(store: Store) -> None:
    store.enqueue_many([spec(id="x"), spec(id="y", after=["x"]), spec(id="z", after="x,y")], 3, NOW)
    assert states(store, "x", "y", "z") == [P, W, W]
    before = store.counts()
    with pytest.raises(UnknownParent, match="'p' cannot run after 'q'"):
        store.enqueue_many([spec(id="p", after=["q"]), spec(id="q")], 3, NOW)
    assert states(store, "p", "q") == [None, None]
    assert store.counts() == before


def test_a_lost_run_with_no_retries_left_cancels_what_runs_after_it(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=0), 3, NOW)
    store.enqueue(spec(id="b", after=["a"]), 3, NOW)
    assert claim(store, "gone").id == "a"
    store.recover_orphans(["gone"], POLICY, NOW + 1000)
    assert states(store, "a", "b") == [JobState.DEAD, C]


def test_a_waiting_job_left_behind_moves_when_a_pool_recovers(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    store.enqueue(spec(id="b", after=["a"]), 3, NOW)
    job = claim(store)
    settle(store, job, Outcome.COMPLETED)
    # As a pool that died between completing a parent and moving its children leaves it.
    _put_back_waiting(store, "b")
    assert states(store, "b") == [W]
    store.recover_orphans([], POLICY, NOW + 2000)
    assert states(store, "b") == [P]


def _put_back_waiting(store: Store, job_id: str) -> None:
    if store.location.startswith("postgresql"):
        import psycopg

        from queuectl_tui.store.postgres.url import parse

        target = parse(store.location)
        options = f"-c search_path={target.schema}"
        with psycopg.connect(target.conninfo, autocommit=True, options=options) as conn:
            conn.execute("UPDATE jobs SET state = 'waiting' WHERE id = %s", (job_id,))
    else:
        from store_helpers import sqlite_file

        with sqlite_file(store.location, writable=True) as conn:
            conn.execute("UPDATE jobs SET state = 'waiting' WHERE id = ?", (job_id,))


@pytest.mark.parametrize("outcome", [Outcome.COMPLETED, Outcome.FAILED])
def test_parents_ending_at_once_free_their_child_once(store: Store, outcome: Outcome) -> None:
    """Two parents of one job end in two transactions at once, each its own pool's: neither
    may leave the job waiting for the other. (A completed run and a dead one take different
    paths on PostgreSQL: one statement and then a transaction, or one transaction.)"""
    from queuectl_tui.store import open_store

    for round_ in range(8):
        parents = [f"r{round_}p{n}" for n in range(2)]
        for parent in parents:
            store.enqueue(spec(id=parent, max_retries=0), 3, NOW)
        any_end = outcome is not Outcome.COMPLETED
        store.enqueue(spec(id=f"r{round_}c", after=parents, after_any_end=any_end), 3, NOW)
        register(store, "wa", "wb")
        jobs = [store.claim(worker, 1, NOW) for worker in ("wa", "wb")]
        assert sorted(job.id for job in jobs) == parents
        others = [open_store(store.location) for _ in jobs]
        start = threading.Barrier(len(jobs))

        def complete(other: Store, job, start: threading.Barrier = start) -> None:  # type: ignore[no-untyped-def]
            start.wait()
            done = Settlement(job, outcome, 0, "", None, NOW + 1)
            other.exchange(ClaimRequest([done], [], 1, NOW + 1, POLICY))

        threads = [
            threading.Thread(target=complete, args=(other, job))
            for other, job in zip(others, jobs, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        for other in others:
            other.close()
        assert states(store, f"r{round_}c") == [P], round_
        run(store, f"r{round_}c")


def test_retrying_a_job_whose_parent_was_deleted_runs_it_without_that_parent(
    store: Store,
) -> None:
    store.enqueue(spec(id="gone"), 3, NOW)
    store.enqueue(spec(id="kept"), 3, NOW)
    store.enqueue(spec(id="child", after=["gone", "kept"]), 3, NOW)
    store.delete(["gone"], NOW + 1, None)
    assert states(store, "child") == [C]
    result = store.retry(["child"], NOW + 2, None)
    assert result.fresh == ["child"] and not result.blocked
    assert states(store, "child") == [W]  # still after `kept`, no longer after `gone`
    assert [link.id for link in store.job_links("child").parents] == ["kept"]


def test_a_retry_of_a_parent_with_its_children_brings_them_all_back(store: Store) -> None:
    store.enqueue(spec(id="p", max_retries=0), 3, NOW)
    store.enqueue(spec(id="ch1", after=["p"]), 3, NOW)
    store.enqueue(spec(id="ch2", after=["ch1"]), 3, NOW)
    run(store, "p", Outcome.FAILED)
    # The grandchild's refusal names the job at the start of it all.
    assert store.retry(["ch2"], NOW + 5, None).blocked["ch2"].endswith("retry 'p' first")
    result = store.retry(["ch1", "ch2", "p"], NOW + 6, None)
    assert sorted(result.fresh) == ["ch1", "ch2", "p"] and not result.blocked
    assert states(store, "p", "ch1", "ch2") == [P, W, W]
