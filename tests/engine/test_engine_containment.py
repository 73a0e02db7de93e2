"""Containment: every process a run starts is stopped when the run ends, times out, is
cancelled or is recovered, including those that leave the process group with setsid.

Each test starts `sleep` with a duration no other test uses, so that the processes it looks
for are its own; whatever a test finds alive is killed in a finally."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_helpers import Queue, wait_until

from queuectl_tui.engine import containment
from queuectl_tui.models import Job, JobState, Outcome

pytestmark = pytest.mark.slow

MODES = ["cgroup", "subreaper"]


def sleepers(duration: str) -> list[int]:
    """Live processes running `sleep DURATION`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
        if argv[:2] == [b"sleep", duration.encode()] and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


@contextlib.contextmanager
def reaped(duration: str) -> Iterator[None]:
    """Kill any `sleep DURATION` the test leaves behind, whether it passed or not."""
    try:
        yield
    finally:
        for pid in sleepers(duration):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def completes_and_leaves_nothing(queue: Queue, command: str, duration: str, what: str) -> None:
    """Run `command` as a job of a fresh pool: it completes, and then no `sleep DURATION` it
    left behind is still running."""
    with reaped(duration):
        queue.start_pool(count=1)
        job_id = queue.enqueue(command)
        queue.wait_state(job_id, JobState.COMPLETED, timeout=30)
        wait_until(lambda: not sleepers(duration), timeout=30, what=what)


def use_mode(queue: Queue, mode: str) -> None:
    if mode == "cgroup":
        if containment.cgroup_parent() is None:
            pytest.skip("no writable cgroup v2 hierarchy on this machine")
    else:
        queue.env[containment.CGROUPS_ENV] = "off"


def daemon(duration: str) -> str:
    return f"setsid sleep {duration} >/dev/null 2>&1 </dev/null &"


def in_a_run_cgroup(duration: str) -> bool:
    """Whether every `sleep DURATION` is in a cgroup a pool made for a run."""
    pids = sleepers(duration)
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cgroup", encoding="utf-8") as handle:
                if "/queuectl-" not in handle.read():
                    return False
        except OSError:
            return False
    return bool(pids)


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children", "rb") as handle:
        return [int(child) for child in handle.read().split()]


@pytest.mark.parametrize("mode", MODES)
def test_a_setsid_child_is_stopped_when_its_job_completes(queue: Queue, mode: str) -> None:
    duration = {"cgroup": "3201", "subreaper": "3202"}[mode]
    use_mode(queue, mode)
    with reaped(duration):
        pool = queue.start_pool(count=1)
        job_id = queue.enqueue(f"{daemon(duration)} sleep 0.5; echo ok")
        queue.wait_state(job_id, JobState.COMPLETED, timeout=30)
        assert queue.attempts(job_id)[-1].output == "ok\n"
        wait_until(lambda: not sleepers(duration), timeout=30, what="the daemon to be stopped")
        # The daemon became the pool's child (its subreaper), which reaped it: no zombie.
        wait_until(lambda: not children(pool.pid), timeout=30, what="the pool to reap it")


@pytest.mark.parametrize("mode", MODES)
def test_a_double_forked_setsid_grandchild_is_stopped(queue: Queue, mode: str) -> None:
    duration = {"cgroup": "3203", "subreaper": "3204"}[mode]
    use_mode(queue, mode)
    command = (
        f"(setsid sh -c 'sleep {duration} >/dev/null 2>&1 </dev/null &' &); sleep 0.3; echo ok"
    )
    completes_and_leaves_nothing(queue, command, duration, "the grandchild to stop")


def test_a_short_job_s_setsid_child_is_stopped_too(queue: Queue) -> None:
    """A job that ends at once (before any cgroup would be made for it) is contained as
    well: its daemon is an orphan of the pool, which finds it by its environment."""
    duration = "3205"
    completes_and_leaves_nothing(
        queue, f"{daemon(duration)} sleep 0.1; echo ok", duration, "the daemon to be stopped"
    )


@pytest.mark.parametrize("mode", MODES)
def test_timed_out_retries_never_overlap_and_leave_nothing(queue: Queue, mode: str) -> None:
    duration = {"cgroup": "3206", "subreaper": "3207"}[mode]
    use_mode(queue, mode)
    queue.configure(backoff_base=1, kill_grace=0.5)
    with reaped(duration):
        queue.start_pool(count=1)
        job_id = queue.enqueue(f"{daemon(duration)} sleep 30", timeout=1, max_retries=2)
        most = 0
        deadline = time.monotonic() + 60
        while queue.job(job_id).state is not JobState.DEAD:
            assert time.monotonic() < deadline, "the job never ended in the DLQ"
            most = max(most, len(sleepers(duration)))
            time.sleep(0.02)
        assert most == 1  # each run had its daemon, and no two runs' daemons ever coexisted
        assert [a.outcome for a in queue.attempts(job_id)] == [Outcome.TIMEOUT] * 3
        wait_until(lambda: not sleepers(duration), timeout=30, what="the last daemon to stop")


@pytest.mark.parametrize("mode", MODES)
def test_a_forced_stop_leaves_no_process_of_a_cancelled_run(queue: Queue, mode: str) -> None:
    duration = {"cgroup": "3208", "subreaper": "3209"}[mode]
    use_mode(queue, mode)
    with reaped(duration):
        pool = queue.start_pool(count=1)
        job_id = queue.enqueue(f"{daemon(duration)} sleep 30")
        wait_until(lambda: sleepers(duration), timeout=30, what="the daemon to start")
        if mode == "cgroup":
            wait_until(lambda: in_a_run_cgroup(duration), timeout=30, what="the run's cgroup")
        pool.signal(signal.SIGTERM)
        pool.wait_event("pool stopping")
        pool.signal(signal.SIGTERM)
        assert pool.wait(timeout=30) == 130
        assert queue.job(job_id).state is JobState.PENDING
        wait_until(lambda: not sleepers(duration), timeout=30, what="the daemon to be stopped")


def test_recovery_stops_the_setsid_grandchild_of_a_killed_pool(queue: Queue) -> None:
    duration = "3210"
    queue.env[containment.CGROUPS_ENV] = "off"  # found by the run's environment alone
    queue.configure(backoff_base=1)
    command = f'if [ "$QUEUECTL_ATTEMPT" = 1 ]; then {daemon(duration)} sleep 30; fi'
    with reaped(duration):
        doomed = queue.start_pool(count=1)
        job_id = queue.enqueue(command)
        wait_until(lambda: sleepers(duration), timeout=30, what="the daemon to start")
        doomed.kill()
        assert sleepers(duration)  # a SIGKILLed pool stops nothing
        successor = queue.start_pool(count=1)
        assert successor.events("recovered")[0]["job"] == job_id
        assert not sleepers(duration)
        queue.wait_state(job_id, JobState.COMPLETED, timeout=30)


def test_a_child_that_alters_its_run_s_variables_is_stopped_too(queue: Queue) -> None:
    """It still names a worker of this pool, and no run of the pool with its variables is
    running any more: the pool stops it when a run ends."""
    duration = "3213"
    queue.env[containment.CGROUPS_ENV] = "off"
    command = f"QUEUECTL_ATTEMPT=99 {daemon(duration)} sleep 0.3; echo ok"
    completes_and_leaves_nothing(queue, command, duration, "the child to be stopped")


def test_a_cgroup_catches_a_child_that_clears_its_environment(queue: Queue) -> None:
    """Without the run's environment only the run's cgroup knows the process is the run's."""
    if containment.cgroup_parent() is None:
        pytest.skip("no writable cgroup v2 hierarchy on this machine")
    duration = "3211"
    command = f"env -i setsid sleep {duration} >/dev/null 2>&1 </dev/null & sleep 1; echo ok"
    completes_and_leaves_nothing(queue, command, duration, "the child to be stopped")


def test_the_next_pool_stops_what_a_killed_pool_left_in_its_cgroups(queue: Queue) -> None:
    if containment.cgroup_parent() is None:
        pytest.skip("no writable cgroup v2 hierarchy on this machine")
    duration = "3212"
    queue.configure(backoff_base=1)
    command = (
        f'if [ "$QUEUECTL_ATTEMPT" = 1 ]; then '
        f"env -i setsid sleep {duration} >/dev/null 2>&1 </dev/null & sleep 30; fi"
    )
    with reaped(duration):
        doomed = queue.start_pool(count=1)
        job_id = queue.enqueue(command)
        wait_until(lambda: in_a_run_cgroup(duration), timeout=30, what="the child in its cgroup")
        doomed.kill()
        assert sleepers(duration)
        queue.start_pool(count=1)
        wait_until(lambda: not sleepers(duration), timeout=30, what="the child to be stopped")
        queue.wait_state(job_id, JobState.COMPLETED, timeout=30)


# -- the job's environment -----------------------------------------------------------------


@pytest.mark.sqlite_only  # a file's resolved path; another backend passes its URL
def test_a_job_gets_the_pool_s_database_in_queuectl_db(queue: Queue) -> None:
    """A job that enqueues more work reaches the queue that runs it, whatever QUEUECTL_DB
    the pool's own environment held."""
    queue.env["QUEUECTL_DB"] = str(queue.root / "elsewhere.db")
    queue.start_pool(count=1)
    chain = f'{sys.executable} -m queuectl_tui enqueue \'{{"id":"chained","command":"true"}}\''
    job_id = queue.enqueue(f'printf "%s\\n" "$QUEUECTL_DB"; cd /; {chain}')
    queue.wait_state(job_id, JobState.COMPLETED, timeout=30)
    assert queue.attempts(job_id)[-1].output.splitlines()[0] == str(queue.db.resolve())
    queue.wait_state("chained", JobState.COMPLETED, timeout=30)
    assert not (queue.root / "elsewhere.db").exists()


# -- the pool's descriptors ----------------------------------------------------------------


def _limited(soft: int, hard: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return apply


@pytest.mark.parametrize("detach", [False, True])
def test_a_pool_larger_than_the_open_files_limit_refuses_to_start(
    queue: Queue, detach: bool
) -> None:
    job_id = queue.enqueue("true")
    flags = ["--detach"] if detach else []
    proc = subprocess.Popen(
        [*queue.base_command(), "worker", "start", "--count", "100", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=queue.env,
        cwd=queue.root,
        preexec_fn=_limited(64, 64),
    )
    try:
        _, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the pool started despite the limit") from None
    finally:
        if detach:
            queue.cli("worker", "stop", check=False)  # if one started in the background
    assert proc.returncode == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "open files" in lines[0] and "ulimit -n" in lines[0], stderr
    assert queue.job(job_id).state is JobState.PENDING
    assert queue.workers() == []  # no pool was started


def test_a_pool_raises_its_soft_open_files_limit_when_the_hard_one_allows(queue: Queue) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip("the hard limit is too low to raise the soft one")
    ids = [queue.enqueue("sleep 1", max_retries=0) for _ in range(60)]
    with open(queue.root / "pool.log", "wb") as log:
        proc = subprocess.Popen(
            [*queue.base_command(), "worker", "start", "--count", "60"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=queue.env,
            cwd=queue.root,
            preexec_fn=_limited(48, hard),
        )
    try:
        for job_id in ids:

            def ended(job_id: str = job_id) -> Job | None:
                job = queue.job(job_id)
                return job if job.state in (JobState.COMPLETED, JobState.DEAD) else None

            job = wait_until(ended, timeout=60, what="every job to end")
            assert job.state is JobState.COMPLETED, job.last_error
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_a_spawn_that_runs_out_of_descriptors_does_not_spend_an_attempt(tmp_path: Path) -> None:
    """The pool's own lack of descriptors is not the job's fault: the run is handed back
    (cancelled), not failed."""
    script = (
        "import os, resource\n"
        "from queuectl_tui.engine.runner import Run, Supervisor\n"
        "supervisor = Supervisor()\n"
        "used = len(os.listdir('/proc/self/fd'))\n"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (used, hard))\n"
        "run = Run('true', timeout=5, output_limit=100, kill_grace=0.5)\n"
        "supervisor.start(run)\n"
        "while not run.done:\n"
        "    supervisor.step(0.1)\n"
        "print(run.result.outcome.value, run.result.error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("interrupted "), result.stdout
    assert "Too many open files" in result.stdout
