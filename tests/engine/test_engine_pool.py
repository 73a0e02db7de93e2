"""Worker pools as real processes: exactly-once under concurrency, retries and backoff,
timeouts, output, heartbeats, and the `worker` commands."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_helpers import Queue, clean_env, process_alive, wait_until

from queuectl_tui.engine.detach import PoolOptions, pool_command
from queuectl_tui.location import is_url
from queuectl_tui.models import JobSpec, JobState, Outcome, WorkerStatus
from queuectl_tui.store import StoreOptions, open_store
from queuectl_tui.timeutil import now_ms, to_iso

pytestmark = pytest.mark.slow


def marker_command(folder: Path) -> str:
    # noclobber: the redirection fails if the marker exists, so a second run of a job fails it.
    return f"set -C; : > {folder}/$QUEUECTL_JOB_ID"


def assert_each_ran_once(queue: Queue, folder: Path, total: int) -> None:
    assert queue.counts()[JobState.COMPLETED] == total
    assert len(list(folder.iterdir())) == total
    with queue.store() as store:
        jobs = store.list_jobs(limit=total + 1)
    assert len(jobs) == total
    assert all(job.runs == 1 and job.attempts == 1 for job in jobs), [
        (job.id, job.runs) for job in jobs if job.runs != 1
    ]


def test_a_basic_job_completes_with_its_output(queue: Queue) -> None:
    pool = queue.start_pool(count=1)
    job_id = queue.enqueue("echo Hello; echo oops >&2", "job1")
    job = queue.wait_state(job_id, JobState.COMPLETED)
    assert job.exit_code == 0
    [attempt] = queue.attempts(job_id)
    assert attempt.outcome is Outcome.COMPLETED
    assert attempt.output == "Hello\noops\n"
    assert attempt.worker_id and attempt.worker_id.startswith(
        pool.events("pool started")[0]["pool"]
    )
    pool.signal(signal.SIGINT)
    assert pool.wait() == 0
    names = [record["event"] for record in pool.events()]
    for name in ("worker started", "claimed", "completed", "pool stopping", "worker stopped"):
        assert name in names
    assert names[-1] == "pool stopped"


@pytest.mark.sqlite_only
@pytest.mark.parametrize("mode", ["poll", "inotify"])
def test_each_wake_mode_picks_up_new_and_scheduled_work(queue: Queue, mode: str) -> None:
    queue.env["QUEUECTL_WAKE"] = mode
    pool = queue.start_pool(count=2)
    assert pool.events("pool started")[0]["wake"] == mode
    run_at = now_ms() + 700
    with queue.store() as store:
        store.enqueue(JobSpec("later", "true", run_at=run_at), 0, now_ms())
    for n in range(5):
        queue.wait_state(queue.enqueue("true", f"now{n}"), JobState.COMPLETED, timeout=15)
    queue.wait_state("later", JobState.COMPLETED, timeout=15)
    assert queue.attempts("later")[0].started_at >= run_at


@pytest.mark.sqlite_only
def test_a_job_made_due_by_a_writer_that_rings_no_bell_still_runs(queue: Queue) -> None:
    # The sqlite3 shell, say: it takes no write turn and rings nothing; the pool's look at
    # data_version (at least every half second) finds the job.
    queue.start_pool(count=1)
    far = now_ms() + 3_600_000
    with queue.store() as store:
        store.enqueue(JobSpec("by-hand", "true", run_at=far), 0, now_ms())
    with contextlib.closing(sqlite3.connect(queue.db, isolation_level=None)) as conn:
        conn.execute("UPDATE jobs SET run_at = 0 WHERE id = 'by-hand'")
    queue.wait_state("by-hand", JobState.COMPLETED, timeout=30)


def test_a_run_ending_in_a_limited_queue_hands_its_room_to_another_pool(queue: Queue) -> None:
    # "reports" runs one job at a time. Pool A serves every queue and has claimed the one
    # running "reports" job; pool B serves "reports" alone and waits. When A's run ends and
    # A takes other work, the room is B's to use: A's result tells the pools so.
    gate = queue.root / "gate"
    queue.cli("queue", "limit", "reports", "1")
    held = queue.enqueue(f"while [ ! -e {gate} ]; do sleep 0.05; done", "held", queue="reports")
    a = queue.start_pool(count=1)
    queue.wait_state(held, JobState.PROCESSING, timeout=30)
    queue.enqueue("sleep 30", "other", queue="default", priority=9)
    queue.enqueue("true", "next-report", queue="reports")
    b = queue.start_pool(count=1, queues=("reports",))
    gate.touch()
    queue.wait_state("next-report", JobState.COMPLETED, timeout=30)
    [attempt] = queue.attempts("next-report")
    assert attempt.worker_id is not None and b.events("claimed")[0]["job"] == "next-report"
    assert a.events("claimed")[-1]["job"] == "other"


@pytest.mark.parametrize("workers", [10, 20])
def test_stress_100_jobs_each_run_exactly_once(queue: Queue, workers: int) -> None:
    markers = queue.root / "markers"
    markers.mkdir()
    queue.enqueue_many(
        [JobSpec(f"s{n:03d}", marker_command(markers), max_retries=0) for n in range(100)]
    )
    pool = queue.start_pool(count=workers)
    queue.wait_all_completed(100)
    assert_each_ran_once(queue, markers, 100)
    pool.signal(signal.SIGTERM)
    assert pool.wait() == 0


@pytest.mark.parametrize("pools", [2, 4])
def test_several_pool_processes_share_one_database(queue: Queue, pools: int) -> None:
    markers = queue.root / "markers"
    markers.mkdir()
    started = [queue.start_pool(count=4, wait=False) for _ in range(pools)]
    for pool in started:
        pool.wait_event("pool started")
    total = 200
    # Enqueued while the pools are idle, in small batches: they all race for each batch.
    for start in range(0, total, 20):
        queue.enqueue_many(
            [
                JobSpec(f"m{n:03d}", marker_command(markers), max_retries=0)
                for n in range(start, start + 20)
            ]
        )
    queue.wait_all_completed(total)
    assert_each_ran_once(queue, markers, total)
    busy_pools = {
        a.worker_id.rsplit(":", 1)[0] for n in range(total) for a in queue.attempts(f"m{n:03d}")
    }
    assert len(busy_pools) > 1
    for pool in started:
        pool.signal(signal.SIGINT)
    assert [pool.wait() for pool in started] == [0] * pools


def test_failures_back_off_exponentially_then_go_to_the_dlq(queue: Queue) -> None:
    queue.configure(backoff_base=2)
    pool = queue.start_pool(count=2)
    job_id = queue.enqueue("echo attempt $QUEUECTL_ATTEMPT; exit 7", "flaky", max_retries=2)
    job = queue.wait_state(job_id, JobState.DEAD, timeout=15)
    assert job.attempts == 3
    assert job.exit_code == 7
    attempts = queue.attempts(job_id)
    assert [a.outcome for a in attempts] == [Outcome.FAILED] * 3
    assert [a.output for a in attempts] == [f"attempt {n}\n" for n in (1, 2, 3)]
    gaps = [
        (later.started_at - earlier.finished_at) / 1000
        for earlier, later in itertools.pairwise(attempts)
    ]
    # Never early. (How late is the machine's business: that the wake-up rings on time and
    # finds the job due is the work alarm's and the clock's tests'.)
    assert gaps[0] >= 2.0, gaps
    assert gaps[1] >= 4.0, gaps
    assert pool.events("retry scheduled")[0]["delay_s"] == 2.0
    dead = queue.cli("dlq", "list", "--json")
    assert [j["id"] for j in json.loads(dead.stdout)] == [job_id]


def test_workers_take_other_jobs_during_a_backoff(queue: Queue) -> None:
    queue.configure(backoff_base=3)
    queue.start_pool(count=1)
    failing = queue.enqueue("exit 1", "failing", max_retries=1)
    queue.wait_state(failing, JobState.FAILED)
    other = queue.enqueue("true", "other")
    done = queue.wait_state(other, JobState.COMPLETED, timeout=2)
    assert queue.job(failing).state is JobState.FAILED  # still waiting out its backoff
    assert done.finished_at is not None


def test_a_scheduled_retry_is_not_claimed_early_after_a_restart(queue: Queue) -> None:
    queue.configure(backoff_base=3)
    first = queue.start_pool(count=2)
    job_id = queue.enqueue("exit 1", "later", max_retries=1)
    failed = queue.wait_state(job_id, JobState.FAILED)
    first.signal(signal.SIGINT)
    assert first.wait() == 0
    second = queue.start_pool(count=2)
    assert queue.job(job_id).state is JobState.FAILED
    second.wait_event("claimed", timeout=6, job=job_id)
    queue.wait_state(job_id, JobState.DEAD)
    retry = queue.attempts(job_id)[1]
    assert retry.started_at >= failed.run_at
    assert retry.started_at - failed.run_at < 500


def test_a_future_job_starts_on_time(queue: Queue) -> None:
    queue.start_pool(count=1)
    run_at = now_ms() + 1500
    job_id = queue.enqueue("true", "scheduled")
    with queue.store() as store:
        store.enqueue(JobSpec("timed", "true", run_at=run_at), 0, now_ms())
    queue.wait_state(job_id, JobState.COMPLETED)
    assert queue.job("timed").state is JobState.PENDING, to_iso(run_at)
    queue.wait_state("timed", JobState.COMPLETED, timeout=15)
    started = queue.attempts("timed")[0].started_at
    assert run_at <= started < run_at + 500


def test_timeout_kills_grandchildren_and_fails_the_attempt(queue: Queue) -> None:
    pidfile = queue.root / "grandchild.pid"
    queue.start_pool(count=1)
    job_id = queue.enqueue(
        f"sleep 30 & echo $! > {pidfile}; wait", "slow", timeout=1, max_retries=0
    )
    job = queue.wait_state(job_id, JobState.DEAD, timeout=10)
    [attempt] = queue.attempts(job_id)
    assert attempt.outcome is Outcome.TIMEOUT
    assert job.last_error == "timed out after 1 s"
    wait_until(lambda: not process_alive(int(pidfile.read_text())), timeout=15)


def test_huge_and_binary_output_is_capped_and_stored_safely(queue: Queue) -> None:
    queue.start_pool(count=2)
    size = 30 * 1024 * 1024
    big = queue.enqueue(f"head -c {size} /dev/zero | tr '\\0' y", "big")
    binary = queue.enqueue("head -c 5000 /dev/urandom; printf '\\000\\377 tail'", "binary")
    queue.wait_state(big, JobState.COMPLETED, timeout=20)
    queue.wait_state(binary, JobState.COMPLETED)
    [attempt] = queue.attempts(big)
    assert len(attempt.output.encode()) < 65536 + 200
    assert f"{size - 65536} earlier bytes of output dropped" in attempt.output
    [attempt] = queue.attempts(binary)
    assert attempt.output.endswith("\ufffd\ufffd tail")
    shown = queue.cli("list", "--json")
    assert {j["id"] for j in json.loads(shown.stdout)} == {"big", "binary"}


def test_heartbeats_advance_during_a_long_job(queue: Queue) -> None:
    queue.configure(heartbeat_interval=0.3, stale_worker_timeout=30)
    queue.start_pool(count=1)
    job_id = queue.enqueue("sleep 20", "long")
    queue.wait_state(job_id, JobState.PROCESSING)
    [before] = queue.workers()

    def beaten_while_busy() -> bool:
        [now] = queue.workers()
        assert (now.status, now.current_job) == (WorkerStatus.BUSY, job_id)
        return now.last_heartbeat >= before.last_heartbeat + 600  # two beats later, or more

    wait_until(beaten_while_busy, timeout=15, what="two heartbeats during the job")
    listed = json.loads(queue.cli("workers", "--json").stdout)
    assert (listed[0]["status"], listed[0]["current_job"]) == ("busy", job_id)
    assert listed[0]["heartbeat_age_s"] >= 0


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "worker stop"])
def test_graceful_stop_lets_the_running_job_finish(queue: Queue, how: str) -> None:
    pool = queue.start_pool(count=1)
    go = queue.root / "go"  # the job runs until the test has seen the pool stopping
    running = queue.enqueue(f"until [ -e {go} ]; do sleep 0.05; done; echo finished", "running")
    queue.wait_state(running, JobState.PROCESSING)
    waiting = queue.enqueue("true", "waiting")
    if how == "worker stop":
        result = queue.cli("worker", "stop")
        assert "Stop requested for 1 pool(s) with 1 worker(s)" in result.stdout
    else:
        pool.signal(getattr(signal, how))
    stopping = pool.wait_event("pool stopping", timeout=30)
    assert stopping["running_jobs"] == 1
    [worker] = queue.workers()
    assert worker.status in (WorkerStatus.STOPPING, WorkerStatus.STOPPED)
    go.touch()
    assert pool.wait() == 0
    assert queue.job(running).state is JobState.COMPLETED
    assert queue.attempts(running)[0].output == "finished\n"
    assert queue.job(waiting).state is JobState.PENDING  # not claimed once stopping
    [worker] = queue.workers()
    assert worker.status is WorkerStatus.STOPPED
    assert worker.jobs_done == 1
    summary = pool.events("pool stopped")[0]
    assert summary["completed"] == 1


def test_second_signal_cancels_without_spending_an_attempt(queue: Queue) -> None:
    pidfile = queue.root / "child.pid"
    flag = queue.root / "quick"
    pool = queue.start_pool(count=1)
    command = f"[ -e {flag} ] && exit 0; sleep 30 & echo $! > {pidfile}; wait"
    job_id = queue.enqueue(command, "stubborn", max_retries=0)
    queue.wait_state(job_id, JobState.PROCESSING)
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the job's child")
    pool.signal(signal.SIGINT)
    pool.wait_event("pool stopping")
    pool.signal(signal.SIGINT)
    assert pool.wait() == 130
    job = queue.job(job_id)
    assert job.state is JobState.PENDING
    assert job.attempts == 0
    assert [a.outcome for a in queue.attempts(job_id)] == [Outcome.INTERRUPTED]
    assert not process_alive(int(pidfile.read_text()))
    # Its budget is intact: with max_retries=0 the next pool still runs it.
    flag.touch()
    queue.start_pool(count=1)
    job = queue.wait_state(job_id, JobState.COMPLETED)
    assert job.attempts == 1
    assert [a.outcome for a in queue.attempts(job_id)] == [Outcome.INTERRUPTED, Outcome.COMPLETED]


def test_third_signal_exits_at_once_and_the_next_pool_recovers(queue: Queue) -> None:
    pidfile = queue.root / "child.pid"
    flag = queue.root / "quick"
    queue.configure(kill_grace=30)
    pool = queue.start_pool(count=1)
    # Ignores TERM, so the second signal's cancellation would wait out the grace period.
    command = f"[ -e {flag} ] && exit 0; trap '' TERM; sleep 30 & echo $! > {pidfile}; wait"
    job_id = queue.enqueue(command, "deaf", max_retries=1)
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the job's child")
    pool.signal(signal.SIGINT)
    pool.wait_event("pool stopping")
    pool.signal(signal.SIGINT)
    pool.wait_event("pool cancelling running jobs")
    pool.signal(signal.SIGINT)
    assert pool.wait(timeout=15) == 130  # not the 30 s grace the second signal waits out
    # The pool sends SIGKILL and leaves without waiting; the kernel delivers it a moment later.
    child = int(pidfile.read_text())
    wait_until(lambda: not process_alive(child), what="the job's child killed")
    assert queue.job(job_id).state is JobState.PROCESSING
    flag.touch()
    successor = queue.start_pool(count=1)
    assert successor.events("recovered")[0]["job"] == job_id
    job = queue.wait_state(job_id, JobState.COMPLETED, timeout=10)
    assert [a.outcome for a in queue.attempts(job_id)] == [Outcome.LOST, Outcome.COMPLETED]
    assert job.attempts == 2


def test_detached_pool_runs_jobs_and_stop_wait_stops_it(queue: Queue) -> None:
    result = queue.cli("worker", "start", "--detach", "--count", "2")
    pid = int(result.stdout.split("(pid ")[1].split(")")[0])
    log_path = Path(result.stdout.split("Log: ")[1].strip())
    if is_url(queue.location):  # a server's queue: in the state folder, named by its URL
        assert log_path.parent == queue.root / "state" / "queuectl"
        assert log_path.name.endswith(".workers.log") and "127.0.0.1" in log_path.name
    else:
        assert log_path == queue.root / "queue.db.workers.log"
    try:
        ids = [queue.enqueue("echo detached", f"d{n}") for n in range(5)]
        for job_id in ids:
            queue.wait_state(job_id, JobState.COMPLETED, timeout=15)
        stopped = queue.cli("worker", "stop", "--wait", "--timeout", "20")
        assert "All workers stopped" in stopped.stdout
        wait_until(lambda: not process_alive(pid), timeout=15)
        assert all(w.status is WorkerStatus.STOPPED for w in queue.workers())
        assert "pool stopped" in log_path.read_text()
    finally:
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_workers_command_shows_status_and_counters(queue: Queue) -> None:
    pool = queue.start_pool(count=2)
    queue.enqueue("true", "ok")
    queue.enqueue("exit 2", "bad", max_retries=0)
    queue.wait_state("ok", JobState.COMPLETED)
    queue.wait_state("bad", JobState.DEAD)
    listed = json.loads(queue.cli("workers", "--json").stdout)
    assert len(listed) == 2
    assert {w["status"] for w in listed} == {"idle"}
    assert sum(w["jobs_done"] for w in listed) == 1
    assert sum(w["jobs_failed"] for w in listed) == 1
    assert all(w["pid"] == pool.pid for w in listed)
    table = queue.cli("workers").stdout
    assert "idle" in table and str(pool.pid) in table
    pool.signal(signal.SIGINT)
    pool.wait()
    listed = json.loads(queue.cli("workers", "--json").stdout)
    assert {w["status"] for w in listed} == {"stopped"}
    assert all(w["stopped_at"] for w in listed)
    assert queue.cli("worker", "stop", "--wait").stdout == "No worker pool is running\n"


def test_pool_refuses_a_database_folder_that_does_not_exist(tmp_path: Path) -> None:
    database = str(tmp_path / "nope" / "q.db")
    result = subprocess.run(
        [sys.executable, "-m", "queuectl_tui", "--db", database, "worker", "start"],
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd=tmp_path,
        timeout=30,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("Error: ")
    assert "Traceback" not in result.stderr


def test_a_reused_pid_is_told_apart_from_the_worker_that_had_it() -> None:
    import os

    from queuectl_tui.engine.liveness import started_after
    from queuectl_tui.timeutil import now_ms

    registered = now_ms()  # a worker registered with some pid; its process then ended
    time.sleep(2.5)  # start times are known to about a second (the boot time is whole seconds)
    newer = subprocess.Popen(["sleep", "30"])  # a process that may have been given that pid
    try:
        assert started_after(newer.pid, registered)  # started after the row: not the worker
        assert not started_after(newer.pid, now_ms())  # started before now
        assert not started_after(os.getpid(), registered)  # the process that registered it
    finally:
        newer.kill()
        newer.wait()


def _registered(location: str, processes: list[subprocess.Popen[bytes]], logs: list[Path]) -> int:
    """Active workers in the queue at `location`, once there is one; a pool that exited
    fails the test with every pool's log."""
    if any(process.poll() is not None for process in processes):
        texts = [log.read_text(errors="replace") for log in logs]
        raise AssertionError(f"a pool exited: {texts}")
    if not Path(location).exists():
        return 0
    # Never the one to create it: the pools race for that alone.
    with open_store(location, StoreOptions(create_at_open=False)) as store:
        return len(store.list_workers(active_only=True))


@pytest.mark.sqlite_only  # a new file; a server's schema is made under its own lock
def test_pools_started_together_on_a_new_queue_register_every_worker(
    backend: str, tmp_path: Path
) -> None:
    """Several pools started at one moment on a queue that does not exist yet all come up
    with all their workers, every time (each creating the file, or finding it half made)."""
    pools, workers = 4, 2
    for attempt in range(8):
        location = str(tmp_path / f"new-{attempt}.db")
        command = pool_command(location, PoolOptions(workers, "json"))
        logs = [tmp_path / f"pool-{attempt}-{n}.log" for n in range(pools)]
        processes = []
        for log in logs:
            with log.open("wb") as output:  # the pool keeps its own copy of the descriptor
                processes.append(
                    subprocess.Popen(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=output,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        env=clean_env(),
                    )
                )
        try:
            wait_until(
                lambda: _registered(location, processes, logs) == pools * workers,  # noqa: B023
                timeout=60,
                what="every pool's workers registered",
            )
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(timeout=60)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("mode", ["poll", "inotify"])
def test_a_result_that_frees_a_dependent_starts_it_while_other_workers_idle(
    queue: Queue, mode: str
) -> None:
    # The result is recorded without a claim (the other worker already found no work), by
    # the dispatcher's own connection, which its feed does not count in poll mode: the
    # exchange's own word that it made work has the free worker look at once, not at the
    # pool's next look of its own (every 5 s; heartbeats are slowed here so as not to hide it).
    queue.configure(heartbeat_interval=30, stale_worker_timeout=120)
    queue.env["QUEUECTL_WAKE"] = mode
    queue.start_pool(count=2)
    gaps = []
    for n in range(3):
        parent = queue.enqueue("sleep 0.3", f"parent{n}")
        child = queue.enqueue("true", f"child{n}", after=(parent,))
        queue.wait_state(child, JobState.COMPLETED, timeout=30)
        gaps.append(queue.attempts(child)[0].started_at - queue.attempts(parent)[-1].finished_at)
    assert sorted(gaps)[1] < 2_500, gaps
