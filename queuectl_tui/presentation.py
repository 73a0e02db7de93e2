"""How both faces show the queue's states and timings, so that the CLI and the console agree:
the colour of each state and worker status (rich style strings, which the CLI's rich and the
console's Textual both read) and the words for when a waiting job may run. No toolkit is
imported here."""

from __future__ import annotations

from .models import Job, JobState, WorkerStatus
from .timeutil import human_seconds

# The states in the order an operator follows a job through the queue: the state tabs of the
# console and of the web dashboard. Waiting (for other jobs) came later, and goes last, so the
# tabs' keys stay as they were.
STATE_ORDER: tuple[JobState, ...] = (
    JobState.PENDING,
    JobState.PROCESSING,
    JobState.FAILED,
    JobState.DEAD,
    JobState.COMPLETED,
    JobState.CANCELLED,
    JobState.WAITING,
)

STATE_STYLES: dict[JobState, str] = {
    JobState.PENDING: "cyan",
    JobState.PROCESSING: "yellow",
    JobState.COMPLETED: "green",
    JobState.FAILED: "magenta",
    JobState.DEAD: "bold red",
    JobState.CANCELLED: "dim",
    JobState.WAITING: "blue",
}

WORKER_STYLES: dict[WorkerStatus, str] = {
    WorkerStatus.IDLE: "cyan",
    WorkerStatus.BUSY: "yellow",
    WorkerStatus.STOPPING: "magenta",
    WorkerStatus.STOPPED: "dim",
    WorkerStatus.LOST: "red",
    WorkerStatus.HUNG: "bold white on red",
}


def next_run(job: Job, now: int) -> tuple[str, str]:
    """When a waiting job may run, and its style: "due", or a countdown for retries and
    scheduled jobs; nothing for a job that is not waiting."""
    if job.state not in (JobState.PENDING, JobState.FAILED):
        return "", ""
    retrying = job.state is JobState.FAILED
    if job.run_at <= now:
        return "due", "magenta" if retrying else "dim"
    seconds = (job.run_at - now + 999) // 1000
    return "in " + human_seconds(seconds), "magenta" if retrying else ""


def exit_style(code: int | None) -> str:
    return "" if code is None else "green" if code == 0 else "red"


def attempts(job: Job) -> tuple[str, str]:
    """Attempts used of the budget ("2/4"), red once the budget is spent."""
    return f"{job.attempts}/{job.max_retries + 1}", "red" if job.attempts > job.max_retries else ""


def countdown(at: int | None, now: int) -> str:
    """How long until `at`: 'in 4m10s', 'due' once it has come, '' when there is none (a
    schedule's next tick, in the CLI, the console and the web page alike)."""
    if at is None:
        return ""
    if at <= now:
        return "due"
    return "in " + human_seconds((at - now + 999) // 1000)
