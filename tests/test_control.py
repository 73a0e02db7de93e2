"""The service layer of an operator's control: what each face's action does to a store,
whatever its size, and the audit line it leaves."""

from __future__ import annotations

import pytest
from store_helpers import NOW, claim

from queuectl_tui import control
from queuectl_tui.models import JobState, Operator
from queuectl_tui.store import Store

from helpers import spec

WHO = Operator("cli", "alice", "laptop")


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Batches of 3 jobs, and the size of each write the store was asked for."""
    monkeypatch.setattr(control, "ACTION_BATCH", 3)
    return []


def _count_writes(store: Store, name: str, sizes: list[int], monkeypatch: pytest.MonkeyPatch):
    real = getattr(store, name)

    def counted(ids, *args, **kwargs):
        sizes.append(len(ids))
        return real(ids, *args, **kwargs)

    monkeypatch.setattr(store, name, counted)


def test_an_action_on_many_jobs_goes_in_batches_with_one_audit_line(
    store: Store, small_batches: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    store.enqueue_many([spec(id=f"j{i}", queue="reports") for i in range(8)], 3, NOW)
    running = claim(store)
    assert running is not None
    ids = control.matching_ids(store, queue="reports")
    _count_writes(store, "cancel", small_batches, monkeypatch)
    report = control.cancel_jobs(store, ids, WHO, "filter queue=reports")
    assert small_batches == [3, 3, 2]
    assert sorted(report.done) == sorted(set(ids) - {running.id})
    assert report.pending_stop == [running.id] and report.complete
    [line] = store.actions()
    assert (line.action, line.subject, line.touched) == ("cancel", "filter queue=reports", 8)


def test_a_few_jobs_go_in_one_transaction_with_their_audit_line(
    store: Store, small_batches: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    store.enqueue_many([spec(id=f"j{i}") for i in range(3)], 3, NOW)
    _count_writes(store, "delete", small_batches, monkeypatch)
    report = control.delete_jobs(store, ["j0", "j1", "j1", "nope"], WHO)
    assert small_batches == [3]  # the repeated id once
    assert report.done == ["j0", "j1"] and report.missing == ["nope"]
    [line] = store.actions()
    assert (line.action, line.touched) == ("delete", 2)


def test_a_retry_in_batches_counts_fresh_and_ready_jobs(
    store: Store, small_batches: list[int]
) -> None:
    store.enqueue_many([spec(id=f"j{i}") for i in range(5)], 3, NOW)
    control.cancel_jobs(store, [f"j{i}" for i in range(5)], WHO)
    report = control.retry_jobs(store, [f"j{i}" for i in range(5)], WHO, "filter state=cancelled")
    assert report.done == [f"j{i}" for i in range(5)]
    assert store.counts()[JobState.PENDING] == 5
    retried = store.actions()[0]
    assert (retried.action, retried.touched) == ("retry", 5)


@pytest.mark.parametrize("act", [control.cancel_jobs, control.retry_jobs, control.delete_jobs])
def test_an_action_that_changes_no_job_leaves_no_audit_line(store: Store, act) -> None:
    """Every face (CLI, console, HTTP, API) makes this one call: a refused action, on an
    unknown id or on a job in a state it leaves alone, is not on record as done."""
    store.enqueue_many([spec(id="busy"), spec(id="waiting")], 3, NOW)
    claim(store)  # busy runs: delete and retry leave it alone
    control.cancel_jobs(store, ["waiting"], WHO)  # one line: the one change made here
    refused = act(store, ["nope"], WHO)
    assert refused.missing == ["nope"] and not refused.done
    left_alone = {"cancel_jobs": "waiting", "retry_jobs": "busy", "delete_jobs": "busy"}
    unchanged = act(store, [left_alone[act.__name__]], WHO)
    assert unchanged.unchanged and not unchanged.done
    assert [line.action for line in store.actions()] == ["cancel"]


def test_a_dlq_retry_of_named_jobs_that_retries_none_leaves_no_audit_line(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    assert control.retry_dead(store, ["a", "nope"], WHO).retried == []
    assert store.actions() == []
    assert control.retry_dead(store, None, WHO).retried == []  # the DLQ was empty: not refused
    assert [(line.subject, line.touched) for line in store.actions()] == [("every dead job", 0)]


def test_named_jobs_in_batches_that_change_nothing_leave_no_audit_line(
    store: Store, small_batches: list[int]
) -> None:
    report = control.cancel_jobs(store, [f"nope{i}" for i in range(7)], WHO)
    assert len(report.missing) == 7
    assert store.actions() == []
    control.cancel_jobs(store, [f"nope{i}" for i in range(7)], WHO, "filter x")  # matched none
    assert [(line.subject, line.touched) for line in store.actions()] == [("filter x", 0)]
