"""The runner: exit codes, interleaved output, the output cap, timeouts and process groups."""

from __future__ import annotations

import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from engine_helpers import process_alive, wait_until

from queuectl_tui.engine.runner import (
    Run,
    RunResult,
    Supervisor,
    TailBuffer,
    describe_exit,
    job_environment,
    stop_lost_run,
)
from queuectl_tui.models import Outcome, Stream


def make(command: str, timeout: float = 10, limit: int = 65536, grace: float = 0.5, **kw) -> Run:
    return Run(command, timeout=timeout, output_limit=limit, kill_grace=grace, **kw)


def drive(supervisor: Supervisor, runs: list[Run], until=lambda: False) -> None:
    """Step the supervisor until every run is over, or `until()` holds."""
    deadline = time.monotonic() + 30
    while not until() and not all(r.done for r in runs):
        assert time.monotonic() < deadline, "the runs did not end"
        supervisor.step(0.05)


def run(command: str, **kw) -> RunResult:
    supervisor = Supervisor()
    one = make(command, **kw)
    supervisor.start(one)
    drive(supervisor, [one])
    assert one.result is not None
    return one.result


def test_exit_zero_completes_and_merged_output_is_interleaved_in_order() -> None:
    result = run("echo one; echo two >&2; echo three", separate_stderr=False)
    assert result.outcome is Outcome.COMPLETED
    assert result.exit_code == 0
    assert result.output == "one\ntwo\nthree\n"
    assert result.error is None


def test_separate_streams_keep_each_ones_order_and_tell_them_apart() -> None:
    supervisor = Supervisor()
    one = make("echo one; echo two >&2; echo three; printf 'caf\\303'; printf '\\251\\n'")
    supervisor.start(one)
    drive(supervisor, [one])
    assert one.result is not None and one.result.outcome is Outcome.COMPLETED
    assert sorted(one.result.output.splitlines()) == ["café", "one", "three", "two"]
    taken = one.live.take(0, final=True)
    assert taken is not None
    by_stream: dict[Stream, str] = {}
    for chunk in taken.chunks:
        by_stream[chunk.stream] = by_stream.get(chunk.stream, "") + chunk.text
    assert by_stream == {Stream.STDOUT: "one\nthree\ncafé\n", Stream.STDERR: "two\n"}


def test_merged_streams_are_all_stdout_in_live_output() -> None:
    supervisor = Supervisor()
    one = make("echo one; echo two >&2", separate_stderr=False)
    supervisor.start(one)
    drive(supervisor, [one])
    taken = one.live.take(0, final=True)
    assert taken is not None
    assert [(c.stream, c.text) for c in taken.chunks] == [(Stream.STDOUT, "one\ntwo\n")]


def test_nonzero_exit_and_missing_command_fail() -> None:
    failed = run("exit 3")
    assert (failed.outcome, failed.exit_code, failed.error) == (
        Outcome.FAILED,
        3,
        "exit code 3",
    )
    missing = run("definitely-not-a-command-xyz")
    assert missing.outcome is Outcome.FAILED
    assert missing.exit_code == 127
    assert "not found" in missing.output
    assert "command not found" in (missing.error or "")


def test_job_sees_its_id_and_attempt() -> None:
    env = job_environment("j-7", 3, "h:1:1")
    result = run('echo "$QUEUECTL_JOB_ID/$QUEUECTL_ATTEMPT/$QUEUECTL_WORKER"', env=env)
    assert result.output == "j-7/3/h:1:1\n"


def test_timeout_kills_the_whole_group_including_grandchildren(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    # The grandchild would sleep for an hour: the run must end through its timeout, which a
    # generous deadline tells apart from waiting for the grandchild.
    with ThreadPoolExecutor(max_workers=1) as executor:
        running = executor.submit(run, f"sleep 3600 & echo $! > {pidfile}; wait", timeout=0.5)
        result = running.result(timeout=60)
    assert result.outcome is Outcome.TIMEOUT
    assert result.error == "timed out after 0.5 s"
    assert not process_alive(int(pidfile.read_text()))


def test_term_is_followed_by_kill_after_the_grace_period(tmp_path: Path) -> None:
    result = run("trap '' TERM; sleep 30", timeout=0.3, grace=0.3)
    assert result.outcome is Outcome.TIMEOUT
    assert result.exit_code == -9
    assert describe_exit(-9) == "killed by SIGKILL"


def test_background_process_left_behind_by_a_finished_job_is_stopped(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    result = run(f"sleep 30 >/dev/null 2>&1 & echo $! > {pidfile}; echo done")
    assert result.outcome is Outcome.COMPLETED
    assert result.output == "done\n"
    assert not process_alive(int(pidfile.read_text()))


def test_output_keeps_the_tail_and_counts_what_was_dropped() -> None:
    total = 30 * 1024 * 1024
    result = run(f"head -c {total} /dev/zero | tr '\\0' x; printf END", limit=65536)
    assert result.outcome is Outcome.COMPLETED
    assert result.dropped_bytes == total + 3 - 65536
    assert result.output.endswith("xxxEND")
    first_line, rest = result.output.split("\n", 1)
    assert f"{result.dropped_bytes} earlier bytes of output dropped" in first_line
    assert len(rest.encode()) == 65536


def test_zero_output_limit_keeps_nothing() -> None:
    result = run("echo hello", limit=0)
    assert result.dropped_bytes == 6
    assert "6 earlier bytes" in result.output


def test_binary_output_is_replaced_not_fatal() -> None:
    result = run("printf 'ok\\377\\376\\000end'")
    assert result.outcome is Outcome.COMPLETED
    assert result.output == "ok\ufffd\ufffd\ufffdend"
    result.output.encode("utf-8")  # storable as text


def test_tail_buffer_cut_inside_a_character_is_replaced() -> None:
    buffer = TailBuffer(3)
    buffer.feed("aé€".encode())  # 1 + 2 + 3 bytes
    assert buffer.text().endswith("€")
    buffer = TailBuffer(4)
    buffer.feed("aé€".encode())
    assert buffer.text().endswith("\ufffd€")


def test_cancel_stops_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    supervisor = Supervisor()
    one = make(f"sleep 30 & echo $! > {pidfile}; wait", timeout=60)
    supervisor.start(one)
    drive(supervisor, [one], until=lambda: pidfile.exists() and pidfile.read_text().strip())
    supervisor.cancel_all()
    drive(supervisor, [one])
    assert one.result is not None and one.result.outcome is Outcome.INTERRUPTED
    assert not process_alive(int(pidfile.read_text()))


def test_cancel_before_start_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    one = make(f"touch {marker}", timeout=5)
    one.cancel(time.monotonic())
    supervisor = Supervisor()
    supervisor.start(one)
    finished, _ = supervisor.step(1)
    assert finished == [one]
    assert one.result is not None and one.result.outcome is Outcome.INTERRUPTED
    assert not marker.exists()


def test_many_runs_at_once_each_get_their_own_result() -> None:
    supervisor = Supervisor()
    runs = [make(f"sleep 0.0{n % 3}; echo {n}; exit {n % 4}") for n in range(12)]
    for one in runs:
        supervisor.start(one)
    finished: list[Run] = []
    deadline = time.monotonic() + 30
    while len(finished) < len(runs):
        assert time.monotonic() < deadline
        finished += supervisor.step(0.1)[0]
    for n, one in enumerate(runs):
        assert one.result is not None
        assert (one.result.output, one.result.exit_code) == (f"{n}\n", n % 4)
    assert supervisor.runs == []


def test_a_watched_descriptor_wakes_the_supervisor() -> None:
    import os

    read_end, write_end = os.pipe()
    supervisor = Supervisor()
    supervisor.watch(read_end)
    threading.Timer(0.1, lambda: os.write(write_end, b"!")).start()
    # Ready, not timed out: the step woke for the descriptor well before its hour was up.
    finished, ready = supervisor.step(3600)
    assert ready == [read_end] and finished == []
    os.close(read_end)
    os.close(write_end)


def test_stop_lost_run_kills_only_that_run_of_that_job() -> None:
    later_run = subprocess.Popen(["sleep", "30"], env=job_environment("job-x", 2, "h:1:1"))
    other_job = subprocess.Popen(["sleep", "30"], env=job_environment("job-x2", 1, "h:1:1"))
    # The same job id and run in another queue, run by another pool's worker.
    other_queue = subprocess.Popen(["sleep", "30"], env=job_environment("job-x", 2, "h:2:1"))
    try:
        assert stop_lost_run("job-x", 1, "h:1:1") == 0
        assert stop_lost_run("job-x", 2, "h:1:1") == 1
        assert later_run.wait(timeout=5) == -9
        assert other_job.poll() is None
        assert other_queue.poll() is None
    finally:
        for proc in (later_run, other_job, other_queue):
            proc.kill()
            proc.wait()


def test_a_job_inherits_only_stdin_stdout_and_stderr(tmp_path: Path) -> None:
    import os

    leaked = os.open(tmp_path / "pool-only", os.O_WRONLY | os.O_CREAT)
    os.set_inheritable(leaked, True)  # as a descriptor handed down by the pool's own parent
    try:
        result = run("ls /proc/$$/fd; readlink /proc/$$/fd/0")  # a new supervisor seals it
    finally:
        os.close(leaked)
    lines = result.output.split()
    assert lines[:3] == ["0", "1", "2"] and len(lines) == 4
    assert lines[3] == "/dev/null"


def test_a_shell_that_cannot_start_is_a_failed_attempt(monkeypatch) -> None:
    from queuectl_tui.engine import spawn

    monkeypatch.setattr(spawn, "SHELL", "/nonexistent/sh")
    result = run("true")
    assert result.outcome is Outcome.FAILED and "could not start" in (result.error or "")


def test_cancel_kills_a_command_that_ignores_sigterm() -> None:
    supervisor = Supervisor()
    # TERM is ignored and the sleep lasts an hour: only the KILL after the grace period can
    # end the run within drive()'s deadline.
    one = make('trap "" TERM; sleep 3600', timeout=3600, grace=0.3)
    supervisor.start(one)
    drive(supervisor, [one], until=lambda: False if one.pid is None else _traps_term(one.pid))
    supervisor.cancel_all()
    drive(supervisor, [one])
    assert one.result is not None and one.result.outcome is Outcome.INTERRUPTED


def _traps_term(pid: int) -> bool:
    """True once the shell has installed its trap (SIGTERM in its ignored set)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            ignored = next(line for line in handle if line.startswith("SigIgn:"))
    except (OSError, StopIteration):
        return False
    return bool(int(ignored.split()[1], 16) & (1 << 14))  # bit 14: SIGTERM (15)


def test_the_popen_fallback_runs_jobs_the_same_way(monkeypatch) -> None:
    from queuectl_tui.engine import spawn

    monkeypatch.setattr(spawn, "_POSIX_SPAWN_SETSID", False)
    result = run("echo out; echo err >&2; ls /proc/$$/fd; exit 4")
    assert result.outcome is Outcome.FAILED and result.exit_code == 4
    # stdout and stderr have a pipe each: each stream's order is kept, not the two's.
    lines = result.output.split()
    assert sorted(lines) == ["0", "1", "2", "err", "out"] and lines[0] in ("out", "err")


def test_a_job_gets_default_sigpipe_so_pipelines_end_quietly(monkeypatch) -> None:
    from queuectl_tui.engine import spawn

    for posix_spawn in (True, False):
        monkeypatch.setattr(spawn, "_POSIX_SPAWN_SETSID", posix_spawn)
        result = run("yes | head -1")
        assert (result.outcome, result.output) == (Outcome.COMPLETED, "y\n")


def test_a_cancel_after_the_command_exited_keeps_its_result() -> None:
    supervisor = Supervisor()
    one = make("echo did-the-work")
    supervisor.start(one)
    assert one.pid is not None
    wait_until(lambda: _exited(one.pid), what="the shell to exit")
    supervisor.cancel_all()  # a forced stop arrives before the loop noticed the exit
    drive(supervisor, [one])
    assert one.result is not None
    assert (one.result.outcome, one.result.output) == (Outcome.COMPLETED, "did-the-work\n")


def _exited(pid: int) -> bool:
    import os

    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def test_cancelling_a_run_that_could_not_start_changes_nothing(monkeypatch) -> None:
    from queuectl_tui.engine import spawn

    monkeypatch.setattr(spawn, "SHELL", "/nonexistent/sh")
    supervisor = Supervisor()
    one = make("true")
    supervisor.start(one)
    supervisor.cancel_all()  # a forced stop in the same turn
    finished, _ = supervisor.step(1)
    assert finished == [one]
    assert one.result is not None and "could not start" in (one.result.error or "")
