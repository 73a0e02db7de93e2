"""The helpers other engine tests lean on: a helper that hangs now and then makes a test flaky
far from its cause."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

from engine_helpers import children, process_state, stop_all


def test_stopping_a_shell_never_hangs_on_a_child_caught_before_its_exec() -> None:
    # dash spawns each command with vfork and waits for its exec in uninterruptible sleep:
    # a child stopped in that window used to hold the freeze for good (2 of 300 rounds).
    shell = subprocess.Popen(["dash", "-c", "while :; do /bin/true; done"], start_new_session=True)

    def processes() -> list[int]:
        return [shell.pid, *children(shell.pid)]

    try:
        for _ in range(300):
            os.kill(shell.pid, signal.SIGSTOP)
            stop_all(processes, what="the shell and its child to stop", timeout=30)
            assert all(process_state(p) in (b"T", b"t", b"Z", None) for p in processes())
            for pid in processes():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            time.sleep(0.005)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.wait(timeout=30)
