"""Faults a pool must survive or end cleanly: a closed terminal (SIGHUP), a closed output
pipe, a frozen or hung pool, a stop request racing a starting pool, Ctrl+C while loading, and
a database file deleted under a running pool."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import InProcessPool, Queue, process_alive, wait_until

from queuectl_tui.engine import dispatch
from queuectl_tui.engine.detach import PoolOptions, pool_command
from queuectl_tui.engine.identity import pid_namespace
from queuectl_tui.engine.liveness import worker_shown_status
from queuectl_tui.models import JobSpec, JobState, Outcome, Worker, WorkerStatus
from queuectl_tui.store import open_store
from queuectl_tui.timeutil import now_ms

pytestmark = pytest.mark.slow


def start_raw_pool(queue: Queue, count: int = 1, **popen: Any) -> subprocess.Popen[bytes]:
    """A pool process whose output the test wires itself (start_pool logs to a file)."""
    command = pool_command(queue.location, PoolOptions(count, "json"), queue.config)
    popen = {"stdout": subprocess.DEVNULL, "stderr": subprocess.STDOUT, **popen}
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        cwd=queue.root,
        env=queue.env,
        **popen,  # type: ignore[arg-type]
    )


def listed_status(queue: Queue, worker_id: str) -> str:
    listed = json.loads(queue.cli("workers", "--json").stdout)
    return next(w["status"] for w in listed if w["id"] == worker_id)


# -- SIGHUP and a closed terminal ---------------------------------------------------------------
def test_sighup_stops_gracefully_and_the_job_runs_exactly_once(queue: Queue) -> None:
    marks = queue.root / "m"
    pool = queue.start_pool(count=1)
    job_id = queue.enqueue(f"echo start >> {marks}; sleep 2; echo end >> {marks}", "hup")
    queue.wait_state(job_id, JobState.PROCESSING)
    # Started, not only claimed: a job claimed as the stop arrives is handed back unstarted.
    wait_until(lambda: marks.exists(), what="the job to start")
    pool.signal(signal.SIGHUP)
    assert pool.wait_event("pool stopping")["reason"] == "SIGHUP"
    assert pool.wait() == 0
    job = queue.job(job_id)
    assert job.state is JobState.COMPLETED and job.runs == 1
    assert marks.read_text() == "start\nend\n"
    queue.start_pool(count=1)  # recovers at startup whatever was left processing
    assert queue.job(job_id).runs == 1
    assert [a.outcome for a in queue.attempts(job_id)] == [Outcome.COMPLETED]
    assert marks.read_text() == "start\nend\n"


class Terminal:
    """A pool whose controlling terminal is a new pty, as in a terminal window; `close()` is
    closing the window (the pty's master side). Leaving the block ends whatever is left."""

    def __init__(self, queue: Queue, log_format: str = "human") -> None:
        self._master, slave = os.openpty()
        command = pool_command(queue.location, PoolOptions(1, log_format), queue.config)
        # A new session leader makes the pty its controlling terminal, then becomes the pool.
        take_the_terminal = (
            "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
            "os.execv(sys.argv[1], sys.argv[1:])"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", take_the_terminal, *command],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            cwd=queue.root,
            env=queue.env,
        )
        os.close(slave)

    def close(self) -> None:
        if self._master >= 0:
            os.close(self._master)
            self._master = -1

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def test_closing_the_terminal_of_a_foreground_pool_lets_its_job_finish_once(
    queue: Queue,
) -> None:
    """Closing the pty's master side is what closing a terminal window does: SIGHUP, then
    every write to the terminal fails."""
    marks = queue.root / "m"
    job_id = queue.enqueue(f"echo start >> {marks}; sleep 2; echo end >> {marks}", "tty")
    with Terminal(queue) as terminal:
        queue.wait_state(job_id, JobState.PROCESSING, timeout=30)
        terminal.close()
        assert terminal.proc.wait(timeout=30) == 0
    job = queue.job(job_id)
    assert job.state is JobState.COMPLETED and job.runs == 1
    assert marks.read_text() == "start\nend\n"


def test_hang_ups_in_a_row_are_one_graceful_stop(queue: Queue) -> None:
    """A closed terminal hangs a foreground pool up more than once (its shell passes the
    SIGHUP on, the kernel hangs up the foreground group as well): none of them cancels the
    running job, and the pool's log goes on in the workers log file."""
    marks = queue.root / "m"
    job_id = queue.enqueue(f"echo start >> {marks}; sleep 3; echo end >> {marks}", "hup2")
    with Terminal(queue, log_format="json") as terminal:
        wait_until(lambda: marks.exists(), timeout=30, what="the job to start")
        terminal.proc.send_signal(signal.SIGHUP)  # the shell's
        stopping = {WorkerStatus.STOPPING}
        wait_until(lambda: {w.status for w in queue.workers()} == stopping, what="stopping")
        terminal.close()  # the kernel's
        terminal.proc.send_signal(signal.SIGHUP)  # and one more
        assert terminal.proc.wait(timeout=60) == 0
    job = queue.job(job_id)
    assert job.state is JobState.COMPLETED and job.runs == 1
    assert [a.outcome for a in queue.attempts(job_id)] == [Outcome.COMPLETED]
    assert marks.read_text() == "start\nend\n"
    logged = [json.loads(line) for line in queue.workers_log().read_text().splitlines()]
    names = [record["event"] for record in logged]
    assert "pool cancelling running jobs" not in names
    assert names.count("pool stopping") == 1
    assert [r["completed"] for r in logged if r["event"] == "pool stopped"] == [1]


def test_a_pool_started_under_nohup_ignores_hang_ups(queue: Queue) -> None:
    """`nohup queuectl worker start` asks the pool to outlive its terminal: it keeps the
    SIGHUP it was given ignored, and goes on taking jobs after one."""
    proc = start_raw_pool(
        queue, count=1, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)
    )
    try:
        queue.wait_state(queue.enqueue("true", "before"), JobState.COMPLETED, timeout=30)
        proc.send_signal(signal.SIGHUP)
        queue.wait_state(queue.enqueue("true", "after"), JobState.COMPLETED, timeout=30)
        assert proc.poll() is None
        assert {w.status for w in queue.workers()} == {WorkerStatus.IDLE}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_a_pool_whose_output_pipe_was_closed_keeps_running_jobs(queue: Queue) -> None:
    proc = start_raw_pool(queue, count=2, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        while b'"pool started"' not in proc.stdout.readline():
            assert proc.poll() is None, "the pool exited before it started"
        proc.stdout.close()  # the reader went away: every later log write fails with EPIPE
        proc.send_signal(signal.SIGPIPE)
        ids = [queue.enqueue("echo some output", f"p{n}") for n in range(10)]
        for job_id in ids:
            queue.wait_state(job_id, JobState.COMPLETED, timeout=30)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert all(queue.job(job_id).runs == 1 for job_id in ids)
        assert {w.status for w in queue.workers()} == {WorkerStatus.STOPPED}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


# -- frozen and hung pools ---------------------------------------------------------------------
def test_a_frozen_pool_shows_hung_then_another_pool_kills_it_and_recovers_its_job(
    queue: Queue,
) -> None:
    queue.configure(
        stale_worker_timeout=1, heartbeat_interval=0.25, hung_pool_timeout=4, backoff_base=1
    )
    runs, pidfile = queue.root / "runs", queue.root / "sleeper.pid"
    command = (
        f'echo "$QUEUECTL_ATTEMPT" >> {runs}; '
        f'if [ "$QUEUECTL_ATTEMPT" = 1 ]; then sleep 60 & echo $! > {pidfile}; wait; fi'
    )
    frozen = queue.start_pool(count=1)
    job_id = queue.enqueue(command, "held")
    sleeper = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip()))
    [worker] = queue.workers()
    frozen.signal(signal.SIGSTOP)
    wait_until(lambda: listed_status(queue, worker.id) == "hung", timeout=30, what="hung")
    assert "hung" in queue.cli("workers").stdout
    assert queue.job(job_id).state is JobState.PROCESSING
    rescuer = queue.start_pool(count=1)
    killed = rescuer.wait_event("pool hung, killing it", timeout=60)
    assert killed["pid"] == frozen.pid
    assert frozen.wait(timeout=30) == -signal.SIGKILL
    wait_until(lambda: not process_alive(sleeper), timeout=10, what="the frozen run to stop")
    job = queue.wait_state(job_id, JobState.COMPLETED, timeout=30)
    assert [a.outcome for a in queue.attempts(job_id)] == [Outcome.LOST, Outcome.COMPLETED]
    assert job.runs == 2 and runs.read_text() == "1\n2\n"
    assert listed_status(queue, worker.id) == "lost"


@pytest.mark.sqlite_only
def test_neither_a_long_lock_nor_a_pause_of_every_pool_gets_a_healthy_pool_killed(
    queue: Queue,
) -> None:
    """What holds every pool back (a long write, a machine asleep: here all pools stopped at
    once) must not make them declare each other hung."""
    queue.configure(stale_worker_timeout=1, heartbeat_interval=0.25, hung_pool_timeout=2)
    pools = [queue.start_pool(count=1) for _ in range(2)]
    before = {w.id: w.last_heartbeat for w in queue.workers()}
    time.sleep(2.0)  # long enough for each to judge the other
    # Idle dispatchers still come round, so idle pools keep beating.
    after = {w.id: w.last_heartbeat for w in queue.workers()}
    assert all(after[key] - before[key] >= 1000 for key in before), (before, after)
    locker = sqlite3.connect(queue.db, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    time.sleep(4.0)  # twice the hung timeout
    locker.execute("ROLLBACK")
    locker.close()
    for pool in pools:
        pool.signal(signal.SIGSTOP)
    time.sleep(4.0)
    for pool in pools:
        pool.signal(signal.SIGCONT)
    time.sleep(3.0)  # past the hung timeout again, for the pools to misjudge if they would
    for pool in pools:
        assert pool.proc.poll() is None
        assert not pool.events("pool hung, killing it")
    job_id = queue.enqueue("true", "still-served")
    queue.wait_state(job_id, JobState.COMPLETED, timeout=30)


def hang_when_finished(monkeypatch: pytest.MonkeyPatch, command: str) -> threading.Event:
    """Make the dispatcher hang (an injected bug) when a run of `command` ends; the returned
    event lets it go."""
    real = dispatch.Dispatcher._finished
    release = threading.Event()

    def stuck(self: dispatch.Dispatcher, run) -> None:
        if run.command == command:
            release.wait(120)
        real(self, run)

    monkeypatch.setattr(dispatch.Dispatcher, "_finished", stuck)
    return release


def test_a_hung_dispatcher_stops_the_heartbeat_and_a_stop_still_ends_the_pool(
    database: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    release = hang_when_finished(monkeypatch, "echo stuck")
    pidfile = tmp_path / "long.pid"
    pool = InProcessPool(database, count=2, heartbeat_interval=0.2, stale_worker_timeout=1.5)
    try:
        with open_store(database) as store:
            store.enqueue_many(
                [
                    JobSpec("long", f"sleep 60 & echo $! > {pidfile}; wait"),
                    JobSpec("stuck", "echo stuck"),
                ],
                1,
                now_ms(),
            )
        long_child = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip()))

        def all_hung() -> bool:
            with open_store(database) as store:
                workers = store.list_workers()
            now = now_ms()
            return all(worker_shown_status(w, 1.5, now) is WorkerStatus.HUNG for w in workers)

        wait_until(all_hung, timeout=30, what="the workers to look hung")
        assert pool.events("dispatcher not responding, heartbeats paused")
        with open_store(database) as store:
            beats = {w.id: w.last_heartbeat for w in store.list_workers()}
        time.sleep(1.0)  # several heartbeat intervals
        with open_store(database) as store:
            assert {w.id: w.last_heartbeat for w in store.list_workers()} == beats
        assert pool.stop() == 1  # like SIGTERM; it gives up on the dispatcher after a bound
        assert pool.events("dispatcher not responding, abandoning its jobs")
        wait_until(lambda: not process_alive(long_child), what="the long run to be killed")
        with open_store(database) as store:
            assert {w.status for w in store.list_workers()} == {WorkerStatus.LOST}
            for job_id in ("long", "stuck"):
                job = store.get(job_id)
                assert job is not None and job.state is JobState.FAILED, job
                assert [a.outcome for a in store.attempts(job_id)] == [Outcome.LOST]
    finally:
        release.set()
        dispatcher = pool.pool.dispatcher
        if dispatcher is not None:
            dispatcher.join(timeout=30)  # let it finish before the log is taken down


def test_hung_pool_timeout_is_a_setting_no_shorter_than_the_stale_timeout(queue: Queue) -> None:
    queue.configure(stale_worker_timeout=5)
    refused = queue.cli("config", "set", "hung-pool-timeout", "2", check=False)
    assert refused.returncode == 2
    assert "hung-pool-timeout must be 0 or at least stale-worker-timeout" in refused.stderr
    assert "hung" not in (queue.config or Path()).read_text()
    queue.cli("config", "set", "hung-pool-timeout", "20")
    assert queue.cli("config", "get", "hung-pool-timeout").stdout == "20\n"


# -- worker stop racing a starting pool --------------------------------------------------------
def test_worker_stop_stops_a_pool_started_a_moment_before(queue: Queue) -> None:
    for attempt in range(10):
        proc = start_raw_pool(queue)
        try:
            said = queue.cli("worker", "stop").stdout
            assert said in (
                "No worker pool is running\n",
                "Stop requested for 1 pool(s) with 1 worker(s)\n",
            ), said
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"try {attempt + 1}: the pool did not stop ({said!r})") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        assert code == 0
    assert not [w for w in queue.workers() if w.status is not WorkerStatus.STOPPED]
    # ... and a stop that returned before a pool started does not stop that pool.
    later = queue.start_pool(count=1)
    job_id = queue.enqueue("true", "after-the-stops")
    queue.wait_state(job_id, JobState.COMPLETED, timeout=30)
    assert later.proc.poll() is None and not later.events("pool stopping")


# -- Ctrl+C while loading ----------------------------------------------------------------------
def test_ctrl_c_right_after_worker_start_exits_quietly(queue: Queue) -> None:
    for delay in (0.05, 0.08, 0.11, 0.14, 0.17, 0.2, 0.25, 0.3, 0.4, 0.6):
        proc = start_raw_pool(queue, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, raw_err = proc.communicate(timeout=30)
        err = raw_err.decode(errors="replace")
        # Python's own start-up (site, runpy), before any queuectl code runs, is out of the
        # program's reach: a traceback may only come from there.
        frames = [line for line in err.splitlines() if line.lstrip().startswith("File ")]
        assert not [f for f in frames if "queuectl_tui" in f], f"after {delay} s:\n{err}"
        if "Traceback" not in err:
            # 0: it had started and stopped gracefully; -2: Python had no handler yet.
            assert proc.returncode in (0, 130, -signal.SIGINT), (delay, proc.returncode, err)
            if proc.returncode != 0:
                assert len(err.splitlines()) <= 1, f"after {delay} s:\n{err}"
        active = [w for w in queue.workers() if w.status is not WorkerStatus.STOPPED]
        assert not active, f"after {delay} s: {active}"


# -- a database deleted under a running pool ---------------------------------------------------
@pytest.mark.sqlite_only
def test_a_pool_stops_when_its_database_file_is_deleted(queue: Queue) -> None:
    pidfile = queue.root / "child.pid"
    pool = queue.start_pool(count=1)
    queue.enqueue(f"sleep 60 & echo $! > {pidfile}; wait", "ghost")
    child = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip()))
    for suffix in ("", "-wal", "-shm"):
        Path(f"{queue.db}{suffix}").unlink(missing_ok=True)
    assert pool.wait(timeout=30) == 1
    [gone] = pool.events("the database file was deleted or replaced, so the pool stops")
    assert gone["database"] == str(queue.db.resolve())
    assert "Traceback" not in pool.log_text()
    assert not process_alive(child)


def test_a_silent_pool_on_this_host_is_shown_hung_and_a_silent_remote_one_stale() -> None:
    from queuectl_tui.tui.widgets.workers_table import WorkersTable

    now = now_ms()
    host = socket.gethostname()
    # A pool of this very process, started now, whose last heartbeat is 5 s old.
    pid, busy = os.getpid(), WorkerStatus.BUSY
    here = Worker("h:1", "h", pid, host, busy, now, now - 5000, None, "j", 0, 0, pid_namespace())
    far = replace(here, id="f:1", host="far-away-host", pid_namespace="another-boot:1")
    fresh = replace(here, id="h:2", last_heartbeat=now)
    gone = replace(here, id="g:1", pid=2**22 + 1)  # no such process
    # This host and hostname, but another PID namespace (a container): its pid is not ours.
    boot = pid_namespace().rpartition(":")[0]
    contained = replace(here, id="c:1", pid_namespace=f"{boot}:1")
    shown = {w.id: worker_shown_status(w, 2.0, now) for w in (here, far, fresh, gone, contained)}
    assert shown == {
        "c:1": WorkerStatus.BUSY,
        "h:1": WorkerStatus.HUNG,
        "f:1": WorkerStatus.BUSY,
        "h:2": WorkerStatus.BUSY,
        "g:1": WorkerStatus.BUSY,
    }
    table = WorkersTable(stale_after_s=2.0)
    status_cell = {w.id: table.build(w, now)[1][3].plain for w in (here, far, fresh)}
    assert status_cell == {"h:1": "hung", "f:1": "busy STALE", "h:2": "busy"}
