"""A foreground pool in a real terminal: bash in tmux runs `queuectl worker start`, and the
terminal is closed under it while its jobs run."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_helpers import Queue, process_alive, wait_until

from queuectl_tui.models import JobState, Outcome, WorkerStatus

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


class Tmux:
    """A tmux server of the test's own: its socket in the test's folder, and run in the
    foreground (-D) as the test's child, so it stays in the test's process group."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.socket = root / "tmux.sock"
        self.env = {k: v for k, v in env.items() if k != "TMUX"}
        self.env.update(TMUX_TMPDIR=str(root), TERM="xterm-256color")
        self.server = subprocess.Popen(
            ["tmux", "-D", "-S", str(self.socket), "-f", "/dev/null"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=root,
            env=self.env,
        )
        wait_until(self.socket.exists, what="the tmux server to listen")

    def __call__(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-S", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=30,
            env=self.env,
            check=True,
        )
        return result.stdout

    def close(self) -> None:
        if self.server.poll() is None:
            self.server.kill()
        self.server.wait(timeout=10)


@pytest.fixture
def tmux(queue: Queue) -> Iterator[Tmux]:
    server = Tmux(queue.root, queue.env)
    try:
        yield server
    finally:
        server.close()


def kill(pid: int, group: bool = False) -> None:
    with contextlib.suppress(OSError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)


def test_closing_a_terminal_lets_a_foreground_pool_finish_each_job_once(
    queue: Queue, tmux: Tmux
) -> None:
    marks = queue.root / "starts"
    # Each start is a line: the job, its shell's pid, session and terminal (0: none), and
    # whether its stdin is a terminal.
    command = (
        "read -r pid comm state ppid pgrp sid tty rest < /proc/self/stat; "
        '[ -t 0 ] && input=tty || input=other; echo "$QUEUECTL_JOB_ID $pid $sid $tty $input" '
        f">> {marks}; sleep 4"
    )
    jobs = [queue.enqueue(command, name) for name in ("a", "b")]
    pool_line = shlex.join([*queue.base_command(), "worker", "start", "--count", "2"])
    tmux("set-option", "-g", "escape-time", "0")
    tmux("new-session", "-d", "-s", "t", "-c", str(queue.root), "bash --norc --noprofile -i")
    shell = int(tmux("display-message", "-p", "-t", "t", "#{pane_pid}"))
    pool = starts = None
    try:
        tmux("send-keys", "-t", "t", "-l", pool_line)
        tmux("send-keys", "-t", "t", "Enter")

        def started() -> list[list[str]] | None:
            lines = marks.read_text().splitlines() if marks.exists() else []
            return [line.split() for line in lines] if len(lines) >= 2 else None

        starts = wait_until(started, timeout=60, what="both jobs to start")
        [pool] = {worker.pid for worker in queue.workers()}
        tmux("kill-session", "-t", "t")
        for job_id in jobs:
            queue.wait_state(job_id, JobState.COMPLETED, timeout=60)
        wait_until(lambda: not process_alive(pool), timeout=60, what="the pool to exit")
        starts = [line.split() for line in marks.read_text().splitlines()]
    finally:
        for pid in [pool, shell] if pool else [shell]:
            kill(pid)
        for start in starts or []:
            kill(int(start[1]), group=True)  # each job's shell leads its own group
    assert sorted(start[0] for start in starts) == jobs  # each started exactly once
    for job_id, pid, session, terminal, stdin in starts:
        assert (session, terminal, stdin) == (pid, "0", "other"), job_id
    for job_id in jobs:
        assert queue.job(job_id).runs == 1
        assert [a.outcome for a in queue.attempts(job_id)] == [Outcome.COMPLETED]
    assert {w.status for w in queue.workers()} == {WorkerStatus.STOPPED}
    log = queue.workers_log().read_text()
    assert "pool cancelling running jobs" not in log
    assert "completed=2" in next(line for line in log.splitlines() if "pool stopped" in line)
