"""Run one job's command: its own process group, a deadline, and a capped output tail.

The command runs as `/bin/sh -c COMMAND` in a new session, so the whole tree it starts shares
one process group that can be signalled at once. stdout and stderr share one pipe (so their
order is kept) that is drained with poll(); the shell's exit is watched through a pidfd.
When the command ends, times out or is cancelled, every process left in its group is stopped
(TERM, then KILL after the grace period): no grandchild outlives its job.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ..models import Outcome
from .spawn import Child, spawn_shell

_READ_SIZE = 65536
_READABLE = select.POLLIN | select.POLLHUP | select.POLLERR
# After the group is killed, a process that escaped into another session may still hold the
# pipe open; stop waiting for its output after this long.
_DRAIN_AFTER_KILL = 0.5
# Without pidfd support the shell's exit is polled at this interval.
_EXIT_POLL = 0.05
# How soon a running job notices cancel() from another thread (a forced shutdown), so that a
# command that ignores SIGTERM still gets SIGKILL after the grace period.
_CANCEL_CHECK = 0.25


@dataclass(frozen=True, slots=True)
class RunResult:
    outcome: Outcome
    exit_code: int | None  # negative: killed by that signal (as subprocess reports it)
    output: str
    error: str | None
    dropped_bytes: int  # output bytes dropped from the front to respect the limit


class TailBuffer:
    """Keeps the last `limit` bytes written to it and counts the bytes it dropped."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.dropped = 0
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data
        # Trim only when twice over the limit, so a long stream costs amortised O(1) per byte.
        excess = len(self._buf) - self.limit
        if excess > max(self.limit, _READ_SIZE):
            del self._buf[:excess]
            self.dropped += excess

    def text(self) -> str:
        excess = len(self._buf) - self.limit
        if excess > 0:
            del self._buf[:excess]
            self.dropped += excess
        # Output is untrusted bytes: undecodable ones become U+FFFD, and so does NUL, which
        # many tools that read a TEXT column treat as the end of the string.
        text = self._buf.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        if self.dropped:
            text = f"[queuectl: {self.dropped} earlier bytes of output dropped]\n" + text
        return text


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    if code == 127:
        return "exit code 127 (command not found)"
    if code == 126:
        return "exit code 126 (command not executable)"
    return f"exit code {code}"


class Execution:
    """One run of one command. `run()` blocks in the calling thread; `cancel()` may be called
    from any other thread to stop the run's process group (a forced shutdown)."""

    def __init__(
        self,
        command: str,
        *,
        timeout: float,
        output_limit: int,
        kill_grace: float,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.command = command
        self.timeout = timeout
        self.kill_grace = kill_grace
        self.env = os.environ if env is None else env
        self.pid: int | None = None
        self._tail = TailBuffer(output_limit)
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._reaped = False  # guarded by _lock: after reaping, the pid may belong to others
        self._proc: Child | None = None

    # -- control from other threads ----------------------------------------------------------
    def cancel(self) -> None:
        """Stop the run: TERM to the group now; `run()` notices within _CANCEL_CHECK seconds
        and sends KILL after the grace period."""
        self._cancelled.set()
        self._signal_group(signal.SIGTERM)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def _signal_group(self, sig: int) -> None:
        with self._lock:
            if self.pid is None or self._reaped:
                return
            # The group id is the shell's pid (start_new_session). While the shell is unreaped
            # (a zombie at worst), that id cannot be reused, so this never hits a stranger.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> RunResult:
        try:
            proc = spawn_shell(self.command, self.env)
        except OSError as error:
            return RunResult(Outcome.FAILED, None, "", f"could not start /bin/sh: {error}", 0)
        with self._lock:
            self._proc = proc
            self.pid = proc.pid
        if self._cancelled.is_set():  # cancelled while starting
            self._signal_group(signal.SIGTERM)
        try:
            reason = self._supervise(proc)
        finally:
            proc.close_output()
        code = proc.returncode
        output = self._tail.text()
        if reason is None and self._cancelled.is_set() and code != 0:
            reason = "cancel"  # cancel() signalled the group before the loop noticed the flag
        if reason == "timeout":
            return RunResult(
                Outcome.TIMEOUT,
                code,
                output,
                f"timed out after {self.timeout:g} s",
                self._tail.dropped,
            )
        if reason == "cancel":
            return RunResult(
                Outcome.CANCELLED,
                code,
                output,
                "cancelled by a forced shutdown",
                self._tail.dropped,
            )
        if code == 0:
            return RunResult(Outcome.COMPLETED, 0, output, None, self._tail.dropped)
        return RunResult(Outcome.FAILED, code, output, describe_exit(code), self._tail.dropped)

    def _supervise(self, proc: Child) -> str | None:
        """Pump output until the shell has exited and the pipe is closed; enforce the deadline
        and cancellation. Returns why the group was stopped early: 'timeout', 'cancel' or None.
        On return the shell is reaped and nothing is left in its process group."""
        out_fd = proc.output_fd
        os.set_blocking(out_fd, False)
        # select.poll rather than selectors: no descriptor of its own and no Python-level
        # bookkeeping, which a busy pool pays for on every job.
        poller = select.poll()
        poller.register(out_fd, _READABLE)
        pidfd = _open_pidfd(proc.pid)
        if pidfd is not None:
            poller.register(pidfd, _READABLE)
        deadline = time.monotonic() + self.timeout
        reason: str | None = None
        kill_at: float | None = None  # when TERM has been sent: the moment to send KILL
        drain_until: float | None = None  # after KILL or exit: stop waiting for EOF then
        exited = False
        eof = False
        try:
            while not (exited and eof):
                now = time.monotonic()
                if not exited and reason is None:
                    if self._cancelled.is_set():
                        reason = "cancel"
                    elif now >= deadline:
                        reason = "timeout"
                    if reason is not None:
                        self._signal_group(signal.SIGTERM)
                        kill_at = now + self.kill_grace
                if kill_at is not None and now >= kill_at:
                    self._signal_group(signal.SIGKILL)
                    kill_at = None
                    drain_until = now + _DRAIN_AFTER_KILL
                if exited and drain_until is not None and now >= drain_until:
                    break  # whatever still holds the pipe left our group; stop waiting
                wait = _EXIT_POLL if pidfd is None and not exited else _CANCEL_CHECK
                for moment in (deadline if reason is None else None, kill_at, drain_until):
                    if moment is not None:
                        wait = min(wait, moment - now)
                if self._cancelled.is_set() and reason is None and not exited:
                    wait = 0
                for fd, _ in poller.poll(max(0.0, wait) * 1000):
                    if fd == out_fd:
                        eof = self._drain(out_fd)
                        if eof:
                            poller.unregister(out_fd)
                    elif not exited:
                        poller.unregister(fd)
                if not exited and _has_exited(proc.pid):
                    exited = True
                    # The shell is done; anything left in its group (a background child still
                    # holding the pipe, or one writing elsewhere) is stopped now.
                    self._stop_leftovers(proc)
                    if not eof:
                        eof = self._drain(out_fd)
                        if not eof and drain_until is None:
                            drain_until = time.monotonic() + _DRAIN_AFTER_KILL
        finally:
            if pidfd is not None:
                os.close(pidfd)
            if not exited:  # an exception above: never leave the group running
                self._signal_group(signal.SIGKILL)
                self._reap(proc)
        return reason

    def _drain(self, fd: int) -> bool:
        """Read what the pipe holds now; True at end of file."""
        while True:
            try:
                data = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                return False
            except OSError:
                return True
            if not data:
                return True
            self._tail.feed(data)

    def _stop_leftovers(self, proc: Child) -> None:
        """Called once the shell has exited (still unreaped): TERM the rest of its group, reap
        the shell, and KILL the group if anything is still in it after the grace period."""
        pgid = proc.pid
        self._signal_group(signal.SIGTERM)
        self._reap(proc)
        give_up = time.monotonic() + self.kill_grace
        pause = 0.001
        while _group_exists(pgid):
            if time.monotonic() >= give_up:
                # The shell is reaped, but a live member keeps the group id reserved.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _reap(self, proc: Child) -> None:
        with self._lock:
            proc.wait()
            self._reaped = True


def _open_pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except OSError:
        return None


def _has_exited(pid: int) -> bool:
    """True once the process has exited; it is left unreaped (WNOWAIT) to keep its pid."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _group_exists(pgid: int) -> bool:
    """True while a live (not zombie) process is in the group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # killpg also succeeds for zombies, which an init that does not reap (common in
    # containers) keeps forever; /proc tells the living from the dead.
    return _live_member_in_proc(pgid)


def _live_member_in_proc(pgid: int) -> bool:
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces and parentheses).
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def stop_lost_run(job_id: str, attempt: int, worker_id: str) -> int:
    """Kill this host's processes of one run of a job that was recovered from a lost worker
    (a pool killed with SIGKILL cannot stop its commands, which live in their own sessions).

    They are found by the environment every run carries, which names the job, the run and the
    worker (host, pool pid and number), so neither a later run of the same job, nor a job of
    the same id in another queue, nor any other process matches. Returns how many processes
    were killed."""
    wanted = {
        f"QUEUECTL_JOB_ID={job_id}".encode(),
        f"QUEUECTL_ATTEMPT={attempt}".encode(),
        f"QUEUECTL_WORKER={worker_id}".encode(),
    }
    killed: set[int] = set()
    for _ in range(3):  # again, in case one forked while it was being killed
        found = [pid for pid in _proc_pids() if wanted <= _environment(pid)]
        fresh = [pid for pid in found if pid not in killed]
        if not fresh:
            break
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.01)  # let the signals land before looking again
    return len(killed)


def _proc_pids() -> list[int]:
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    me = os.getpid()
    return [int(entry) for entry in entries if entry.isdigit() and int(entry) != me]


def _environment(pid: int) -> set[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return set(handle.read().split(b"\0"))
    except OSError:
        return set()


_base_environment: dict[str, str] | None = None


def job_environment(job_id: str, attempt: int, worker_id: str) -> dict[str, str]:
    """The pool's environment plus the job's identity. The pool's environment is read once:
    decoding os.environ for every job cost a busy pool 5% of its time."""
    global _base_environment
    if _base_environment is None:
        _base_environment = dict(os.environ)
    env = _base_environment.copy()
    env["QUEUECTL_JOB_ID"] = job_id
    env["QUEUECTL_ATTEMPT"] = str(attempt)
    env["QUEUECTL_WORKER"] = worker_id
    return env
