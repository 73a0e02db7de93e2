"""The CLI and the console show states and timings the same way."""

from __future__ import annotations

import pytest

from queuectl_tui.cli import render
from queuectl_tui.models import Job, JobState
from queuectl_tui.tui import format as console

NOW = 1_700_000_000_000


def make_job(state: JobState, run_at: int) -> Job:
    return Job(1, "a", "true", state, 0, run_at, 3, None, 1, 1, None, NOW, NOW, *[None] * 6)


@pytest.mark.parametrize("state", list(JobState))
def test_both_faces_colour_every_state_alike(state: JobState) -> None:
    assert render.state_text(state).style == console.state_text(state).style != ""


@pytest.mark.parametrize(
    ("state", "run_at", "words"),
    [
        (JobState.PENDING, NOW - 5, "due"),
        (JobState.FAILED, NOW + 90_500, "in 1m31s"),
        (JobState.PENDING, NOW + 4_000, "in 4s"),
        (JobState.COMPLETED, NOW - 5, ""),
    ],
)
def test_both_faces_say_when_a_job_may_run_in_the_same_words(
    state: JobState, run_at: int, words: str
) -> None:
    job = make_job(state=state, run_at=run_at)
    assert render.next_run(job, NOW) == console.next_run(job, NOW).plain == words
