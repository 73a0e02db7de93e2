"""Crash recovery: the jobs of a SIGKILLed pool are recovered at once by the next pool on this
host, by a surviving pool within the stale window, and a silent remote worker after
stale_worker_timeout."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from engine_helpers import Queue, process_alive, wait_until

from queuectl_tui.models import JobState, Outcome, Worker, WorkerStatus
from queuectl_tui.timeutil import now_ms

pytestmark = pytest.mark.slow


def long_then_quick(queue: Queue) -> str:
    """Slow on the first attempt only, and leaves one line per run in runs/<job id>."""
    runs = queue.root / "runs"
    runs.mkdir(exist_ok=True)
    return (
        f'echo "$QUEUECTL_ATTEMPT" >> {runs}/$QUEUECTL_JOB_ID; '
        f'if [ "$QUEUECTL_ATTEMPT" = 1 ]; then sleep 1; fi'
    )


def test_sigkilled_pool_jobs_are_recovered_at_once_by_the_next_pool(queue: Queue) -> None:
    queue.configure(backoff_base=1)
    doomed = queue.start_pool(count=2)
    command = long_then_quick(queue)
    long_ids = [queue.enqueue(command, f"long{n}") for n in range(2)]
    for job_id in long_ids:
        queue.wait_state(job_id, JobState.PROCESSING)
    short_ids = [queue.enqueue("true", f"short{n}") for n in range(6)]
    doomed.kill()
    assert all(queue.job(j).state is JobState.PROCESSING for j in long_ids)

    successor = queue.start_pool(count=2)
    # Recovered before the new pool even reported itself started.
    for job_id in long_ids:
        job = queue.job(job_id)
        assert job.state in (JobState.FAILED, JobState.PROCESSING, JobState.COMPLETED)
        first = queue.attempts(job_id)[0]
        assert first.outcome is Outcome.LOST
        assert "was lost mid-job" in (first.error or "")
    recovered = {record["job"] for record in successor.events("recovered")}
    assert recovered == set(long_ids)
    lost = {record["worker"] for record in successor.events("worker lost")}
    assert lost == {f"{doomed.events('pool started')[0]['pool']}:{n}" for n in (1, 2)}

    for job_id in long_ids + short_ids:
        queue.wait_state(job_id, JobState.COMPLETED, timeout=10)
    assert queue.counts()[JobState.PROCESSING] == 0
    for job_id in long_ids:
        job = queue.job(job_id)
        assert job.attempts == 2  # the lost attempt counts
        assert (queue.root / "runs" / job_id).read_text() == "1\n2\n"
    statuses = {w.id: w.status for w in queue.workers()}
    assert sorted(s.value for s in statuses.values()).count("lost") == 2


def test_a_surviving_pool_recovers_a_killed_pools_job(queue: Queue) -> None:
    # A stale window long enough that a recovery inside it can only come from seeing the
    # killed pool's process gone, however loaded the machine.
    queue.configure(backoff_base=1, stale_worker_timeout=20, heartbeat_interval=0.5)
    doomed = queue.start_pool(count=1)
    job_id = queue.enqueue(long_then_quick(queue), "victim")
    queue.wait_state(job_id, JobState.PROCESSING)
    survivor = queue.start_pool(count=1)
    killed_at = now_ms()
    doomed.kill()
    record = survivor.wait_event("recovered", timeout=30, job=job_id)
    assert record["state"] == "failed"
    # Well inside the stale window: the stale path could not end before about 19.5 s.
    assert queue.attempts(job_id)[0].finished_at - killed_at < 15_000
    job = queue.wait_state(job_id, JobState.COMPLETED, timeout=10)
    assert job.attempts == 2
    assert queue.attempts(job_id)[1].worker_id.startswith(
        survivor.events("pool started")[0]["pool"]
    )


def test_a_silent_remote_worker_is_reaped_after_the_stale_timeout(queue: Queue) -> None:
    queue.configure(backoff_base=1, stale_worker_timeout=2, heartbeat_interval=0.5)
    job_id = queue.enqueue("echo rerun", "remote")
    now = now_ms()
    with queue.store() as store:
        # A worker on another host that claimed a job and then fell silent.
        store.register_workers(
            [
                Worker(
                    "far:99:1",
                    "far:99",
                    99,
                    "far-away",
                    WorkerStatus.IDLE,
                    now,
                    now,
                    None,
                    None,
                    0,
                    0,
                )
            ]
        )
        claimed = store.claim("far:99:1", 99, now)
    assert claimed is not None and claimed.id == job_id
    pool = queue.start_pool(count=1)
    time.sleep(max(0.0, (now + 1200 - now_ms()) / 1000))
    assert queue.job(job_id).state is JobState.PROCESSING  # not before the stale timeout
    lost = pool.wait_event("worker lost", timeout=15, worker="far:99:1")
    assert lost["reason"].startswith("no heartbeat for")
    reaped_at = now_ms()
    assert reaped_at - now >= 2000
    job = queue.wait_state(job_id, JobState.COMPLETED, timeout=10)
    assert [a.outcome for a in queue.attempts(job_id)] == [Outcome.LOST, Outcome.COMPLETED]
    assert job.attempts == 2
    far = next(w for w in queue.workers() if w.id == "far:99:1")
    assert far.status is WorkerStatus.LOST


def test_a_job_that_kills_its_pool_every_time_ends_in_the_dlq(queue: Queue) -> None:
    """The lost attempt counts: a poison job cannot loop forever."""
    queue.configure(backoff_base=1)
    job_id = queue.enqueue("kill -9 $PPID; sleep 5", "poison", max_retries=1)
    for _ in range(2):
        pool = queue.start_pool(count=1, wait=False)  # it may die before it reports in

        def died(proc: subprocess.Popen[bytes] = pool.proc) -> bool:
            return proc.poll() is not None

        wait_until(died, timeout=10, what="the pool to die")
        assert pool.proc.returncode == -signal.SIGKILL
        time.sleep(0.2)  # the pool's leftovers gone
    queue.start_pool(count=1)
    job = queue.wait_state(job_id, JobState.DEAD, timeout=15)
    assert job.attempts == 2
    assert [a.outcome for a in queue.attempts(job_id)] == [Outcome.LOST, Outcome.LOST]


def test_a_lost_run_is_rerun_before_the_backlog_behind_it(queue: Queue) -> None:
    """The first idle worker after recovery starts the recovered job, not the backlog that
    was enqueued after it."""
    queue.configure(backoff_base=2)
    doomed = queue.start_pool(count=1)
    # Its first run outlasts the test (recovery stops it); the second ends at once.
    held = queue.enqueue('if [ "$QUEUECTL_ATTEMPT" = 1 ]; then sleep 120; fi', "held")
    queue.wait_state(held, JobState.PROCESSING, timeout=30)
    backlog = [queue.enqueue("sleep 0.05", f"backlog{n:02d}") for n in range(30)]
    doomed.kill()

    successor = queue.start_pool(count=1)
    queue.wait_state(held, JobState.COMPLETED, timeout=60)
    claimed = [record["job"] for record in successor.events("claimed")]
    assert claimed[:1] == [held], claimed
    job = queue.job(held)
    assert (job.attempts, [a.outcome for a in queue.attempts(held)]) == (
        2,
        [Outcome.LOST, Outcome.COMPLETED],
    )
    for job_id in backlog:
        queue.wait_state(job_id, JobState.COMPLETED, timeout=60)


def test_worker_stop_does_not_wait_for_a_killed_pool(queue: Queue) -> None:
    pool = queue.start_pool(count=2)
    pool.kill()
    assert {w.status for w in queue.workers()} == {WorkerStatus.IDLE}  # nobody reaped them yet
    result = queue.cli("worker", "stop", "--wait", "--timeout", "5")
    assert result.stdout == "No worker pool is running\n"


def test_recovery_stops_the_orphaned_run_of_a_killed_pool(queue: Queue) -> None:
    """A SIGKILLed pool cannot stop its commands; the pool that recovers the job does, so the
    lost run and the retry never overlap."""
    pidfile = queue.root / "child.pid"
    shellfile = queue.root / "shell.pid"
    queue.configure(backoff_base=1)
    doomed = queue.start_pool(count=1)
    command = (
        f'if [ "$QUEUECTL_ATTEMPT" = 1 ]; then echo $$ > {shellfile}; '
        f"sleep 30 & echo $! > {pidfile}; wait; fi"
    )
    job_id = queue.enqueue(command, "orphan")
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the job's child")
    doomed.kill()
    child, shell = int(pidfile.read_text()), int(shellfile.read_text())
    assert process_alive(child) and process_alive(shell)  # nobody stopped them yet
    successor = queue.start_pool(count=1)
    assert successor.events("recovered")[0]["stopped_processes"] == 2
    assert not process_alive(child) and not process_alive(shell)
    job = queue.wait_state(job_id, JobState.COMPLETED, timeout=10)
    assert job.attempts == 2
