"""The rules for a job after each attempt, with no database."""

from __future__ import annotations

import pytest

from queuectl_tui.lifecycle import DELETED, RetryPolicy, Transition, after_attempt, after_parents
from queuectl_tui.models import JobState, Outcome

NOW = 1_700_000_000_000
SCHEDULED = NOW - 5_000
POLICY = RetryPolicy(2.0, 3600.0)


def _after(outcome: Outcome, attempts: int = 1, max_retries: int = 3, **kw) -> Transition:
    return after_attempt(
        outcome,
        attempts=attempts,
        max_retries=max_retries,
        scheduled_at=SCHEDULED,
        now=NOW,
        policy=kw.get("policy", POLICY),
        cancel_requested=kw.get("cancel_requested", False),
    )


def test_a_completed_job_keeps_its_schedule_and_attempts() -> None:
    assert _after(Outcome.COMPLETED, attempts=2) == Transition(JobState.COMPLETED, SCHEDULED, 2)


def test_an_interrupted_run_goes_back_as_it_was_and_does_not_count() -> None:
    assert _after(Outcome.INTERRUPTED, attempts=2) == Transition(JobState.PENDING, SCHEDULED, 1)


@pytest.mark.parametrize("outcome", [Outcome.FAILED, Outcome.TIMEOUT])
def test_failures_back_off_exponentially_while_the_budget_lasts(outcome: Outcome) -> None:
    delays = [_after(outcome, attempts=n).run_at - NOW for n in (1, 2, 3)]
    assert delays == [2_000, 4_000, 8_000]
    assert {_after(outcome, attempts=n).state for n in (1, 2, 3)} == {JobState.FAILED}
    assert _after(outcome, attempts=4) == Transition(JobState.DEAD, NOW, 4)


def test_a_lost_run_counts_but_keeps_its_place_in_line() -> None:
    """Due again at once, with the run_at it had: before the jobs that were behind it."""
    for n in (1, 2, 3):
        assert _after(Outcome.LOST, attempts=n) == Transition(JobState.FAILED, SCHEDULED, n)
    assert _after(Outcome.LOST, attempts=4) == Transition(JobState.DEAD, NOW, 4)


def test_no_retries_means_dead_after_the_first_failure() -> None:
    assert _after(Outcome.FAILED, attempts=1, max_retries=0).state is JobState.DEAD


def test_the_backoff_is_capped_even_where_the_power_overflows() -> None:
    policy = RetryPolicy(10.0, 60.0)
    assert policy.delay_ms(1) == 10_000
    assert policy.delay_ms(5) == 60_000
    assert RetryPolicy(1e308, 30.0).delay_ms(1000) == 30_000
    assert _after(Outcome.FAILED, attempts=50, max_retries=100, policy=policy).run_at == (
        NOW + 60_000
    )


def test_an_outcome_that_is_only_ever_read_cannot_be_recorded() -> None:
    with pytest.raises(ValueError, match="unknown"):
        _after(Outcome.UNKNOWN)


def test_a_run_an_operator_cancelled_ends_the_job_cancelled_without_retry() -> None:
    assert _after(Outcome.CANCELLED, attempts=1) == Transition(JobState.CANCELLED, SCHEDULED, 1)


@pytest.mark.parametrize("outcome", [Outcome.FAILED, Outcome.TIMEOUT, Outcome.LOST])
def test_once_a_cancel_was_asked_a_failed_run_is_not_retried(outcome: Outcome) -> None:
    after = _after(outcome, attempts=1, cancel_requested=True)
    assert after == Transition(JobState.CANCELLED, SCHEDULED, 1)


def test_a_run_that_completed_despite_a_cancel_request_is_completed() -> None:
    after = _after(Outcome.COMPLETED, attempts=1, cancel_requested=True)
    assert after.state is JobState.COMPLETED


def test_an_interrupted_run_of_a_job_asked_to_cancel_ends_cancelled_at_no_cost() -> None:
    after = _after(Outcome.INTERRUPTED, attempts=2, cancel_requested=True)
    assert after == Transition(JobState.CANCELLED, SCHEDULED, 1)


# -- jobs that run after others ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("ends", "any_end", "state", "blocked_by"),
    [
        ([("a", None)], False, JobState.WAITING, None),
        ([("a", "completed")], False, JobState.PENDING, None),
        ([("a", "completed"), ("b", None)], False, JobState.WAITING, None),
        # The first parent that failed, in the order given, is named, even while others run.
        ([("a", None), ("b", "dead"), ("c", "cancelled")], False, JobState.CANCELLED, "b"),
        ([("a", DELETED)], False, JobState.CANCELLED, "a"),
        ([("a", "dead"), ("b", None)], True, JobState.WAITING, None),
        ([("a", "dead"), ("b", "completed"), ("c", DELETED)], True, JobState.PENDING, None),
    ],
)
def test_a_job_after_others_waits_runs_or_is_cancelled_by_their_ends(
    ends: list[tuple[str, str | None]], any_end: bool, state: JobState, blocked_by: str | None
) -> None:
    readiness = after_parents(ends, any_end)
    assert (readiness.state, readiness.blocked_by) == (state, blocked_by)
    assert (readiness.reason is None) == (state is not JobState.CANCELLED)


def test_the_reason_names_the_parent_and_how_it_ended() -> None:
    assert after_parents([("x", "dead")], False).reason == "job 'x' it runs after ended dead"
    assert after_parents([("x", DELETED)], False).reason == "job 'x' it runs after was deleted"
