"""Run one job's command: its own process group, a deadline, and a capped output tail.

The command runs as `/bin/sh -c COMMAND` in a new session, so the tree it starts shares one
process group that can be signalled at once. stdout and stderr have a pipe each (so that
live output tells them apart; what two pipes receive within one poll may be read in either
order, as with `docker logs`), or share one where `output-streams` is `merged` (their exact
order is kept); the pipes are drained with poll(), and the shell's exit is watched through a
pidfd.
When the command ends, times out or is cancelled, every process left in its group, and every
one that left the group (see containment.py), is stopped (TERM, then KILL after the grace
period): no child outlives its job.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ..models import Outcome, Stream
from . import procfs
from .containment import (
    CGROUP_AFTER,
    PoolCgroup,
    RunProcesses,
    cgroup_parent,
    environment,
    pool_orphans,
    reap_orphans,
    stop_strays,
    sweep_dead_pools,
)
from .live_output import LiveOutput
from .spawn import Child, seal_inherited_fds, spawn_shell

_READ_SIZE = 65536
_READABLE = select.POLLIN | select.POLLHUP | select.POLLERR
# After the group is killed, a process that escaped into another session may still hold the
# pipe open; stop waiting for its output after this long.
_DRAIN_AFTER_KILL = 0.5
# Without pidfd support the shell's exit is polled at this interval.
_EXIT_POLL = 0.05
# A shell that could not start for want of the pool's resources (descriptors, processes,
# memory) is handed back without spending an attempt, after this pause so that the pool does
# not spin on claiming it again.
_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM)
_RESOURCE_PAUSE = 1.0


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


class Run:
    """One run of one command, driven without blocking by a Supervisor's poll loop.

    A run starts, then moves through its phases as the loop reports its descriptors ready and
    calls `advance()` at the moments it asked for: running (until the shell exits, the deadline
    passes or it is cancelled), stopping leftovers (TERM to the rest of the group, KILL after
    the grace period), and draining the pipe. `result` is set when it is over."""

    def __init__(
        self,
        command: str,
        *,
        timeout: float,
        output_limit: int,
        kill_grace: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        separate_stderr: bool = True,
        cwd: str | None = None,
    ) -> None:
        self.command = command
        self.cwd = cwd  # the job's own working directory; None: the pool's
        self.separate_stderr = separate_stderr
        self.stdin = stdin  # a typed job's payload; the command reads it from its stdin
        self.timeout = timeout
        self.kill_grace = kill_grace
        self.env = os.environ if env is None else env
        self.result: RunResult | None = None
        self.child: Child | None = None
        self.pidfd: int | None = None
        self._tail = TailBuffer(output_limit)
        self.live = LiveOutput(output_limit)  # the same output, in pieces for the store
        self._streams: dict[int, Stream] = {}  # the pipes not yet at end of file
        self.started_at = 0.0  # monotonic
        self._deadline = 0.0
        self._reason: str | None = None  # why the group was stopped early: timeout or cancel
        self._kill_at: float | None = None  # TERM was sent: the moment to send KILL
        self._exited = False  # the shell has exited (and is reaped from then on)
        self._leftovers_until: float | None = None  # group members outlived the shell
        self._leftover_pause = 0.001
        self._recheck_at: float | None = None
        self._drain_until: float | None = None  # after KILL or exit: stop waiting for EOF
        self._exit_check_at = 0.0  # without a pidfd the exit is polled for
        self.processes = RunProcesses(self.env)  # the run's processes outside its group
        self._contain_at: float | None = None  # when to move the run into a cgroup
        self._cgroups: PoolCgroup | None = None  # its pool's, where it gets one
        self._no_resources_until: float | None = None  # could not start: hand back then
        self._start_error: str | None = None

    @property
    def pid(self) -> int | None:
        return None if self.child is None else self.child.pid

    @property
    def done(self) -> bool:
        return self.result is not None

    def start(self, now: float, cgroups: PoolCgroup | None = None) -> None:
        """Start the command; after CGROUP_AFTER it moves into a cgroup of `cgroups` (none
        without them)."""
        if self.result is not None:
            return  # cancelled before it started
        try:
            child = spawn_shell(self.command, self.env, self.stdin, self.separate_stderr, self.cwd)
        except OSError as error:
            error_text = f"could not start /bin/sh: {error}"
            if self.cwd is not None and not os.path.isdir(self.cwd):
                error_text = f"the working directory {self.cwd} is not a directory here"
            if error.errno in _RESOURCE_ERRORS:
                self._start_error = (
                    f"{error_text} (the pool's resources; the attempt is not counted)"
                )
                self._no_resources_until = now + _RESOURCE_PAUSE
                return
            self.result = RunResult(Outcome.FAILED, None, "", error_text, 0)
            return
        self.child = child
        self.started_at = now
        self._streams = {child.output_fd: Stream.STDOUT}
        if child.error_fd is not None:
            self._streams[child.error_fd] = Stream.STDERR
        for fd in self._streams:
            os.set_blocking(fd, False)
        self.pidfd = _open_pidfd(child.pid)
        self._deadline = now + self.timeout
        self._exit_check_at = now + _EXIT_POLL
        if cgroups is not None and cgroup_parent() is not None:
            self._cgroups = cgroups
            self._contain_at = now + CGROUP_AFTER

    def cancel(self, now: float, by_operator: bool = False) -> bool:
        """Stop the run: TERM to the group now, KILL after the grace period. A command that
        has already exited is left to finish normally: its result stands. The run ends
        `cancelled` if an operator asked, `interrupted` if the pool is shutting down. True
        if this call stopped it (False: over, exited, or being stopped already)."""
        reason = "operator" if by_operator else "shutdown"
        if self.result is not None:
            return False  # over already (or it could not start)
        if self.child is None:
            self.result = self._finish(reason)  # never started
            return True
        if not self._exited and self._reason is None and not _has_exited(self.child.pid):
            self._stop_early(reason, now)
            return True
        return False

    # -- driven by the supervisor --------------------------------------------------------------
    @property
    def _eof(self) -> bool:
        return not self._streams

    def on_output(self, fd: int) -> bool:
        """A pipe is readable (or closed); True once it reached end of file."""
        if fd in self._streams and self._drain(fd):
            del self._streams[fd]
            return True
        return fd not in self._streams

    def _drain_all(self) -> None:
        for fd in list(self._streams):
            self.on_output(fd)

    def advance(self, now: float) -> None:
        """Act on whatever is due: exit, deadline, kill, leftovers, the end of draining."""
        child = self.child
        if self.result is not None:
            return
        if child is None:
            if self._no_resources_until is not None and now >= self._no_resources_until:
                self.result = RunResult(Outcome.INTERRUPTED, None, "", self._start_error, 0)
            return
        if not self._exited:
            if self._reason is None and now >= self._deadline:
                self._stop_early("timeout", now)
            if self._kill_at is not None and now >= self._kill_at:
                self._kill_group(child.pid)
                self.processes.signal(child.pid, signal.SIGKILL)
                self._kill_at = None
                self._drain_until = now + _DRAIN_AFTER_KILL
            if not _has_exited(child.pid):
                if self._contain_at is not None and now >= self._contain_at:
                    self._contain_at = None
                    if self._reason is None and self._cgroups is not None:
                        self.processes.contain(child.pid, self._cgroups)
                self._exit_check_at = now + _EXIT_POLL
                return
            self._exited = True
            # The shell is done; anything left in its group (a background child still holding
            # the pipe, or one writing elsewhere) is stopped now, while the unreaped shell
            # still reserves the group id; so is whatever of the run left the group.
            self._signal_group(signal.SIGTERM)
            self.processes.after_exit()
            child.wait()
            self._leftovers_until = now + self.kill_grace
            self._leftover_pause = 0.001
        if self._leftovers_until is not None:
            if _group_exists(child.pid) or self.processes.alive():
                if now < self._leftovers_until:
                    self._recheck_at = now + self._leftover_pause
                    self._leftover_pause = min(self._leftover_pause * 2, 0.05)
                    return
                # The shell is reaped, but a live member keeps the group id reserved.
                self._kill_group(child.pid)
                self.processes.signal(None, signal.SIGKILL)
            self._leftovers_until = self._recheck_at = None
            self._drain_all()
            if not self._eof and self._drain_until is None:
                self._drain_until = now + _DRAIN_AFTER_KILL
        # Whatever still holds the pipe after the drain window left our group: stop waiting.
        if self._eof or (self._drain_until is not None and now >= self._drain_until):
            self.result = self._finish(self._reason)

    def wake_at(self) -> float | None:
        """The next moment `advance()` must run even if no descriptor is ready."""
        if self.result is not None:
            return None
        if self.child is None:
            return self._no_resources_until
        if self._exited:
            return self._recheck_at if self._leftovers_until is not None else self._drain_until
        moment = self._kill_at if self._reason is not None else self._deadline
        if self._contain_at is not None and moment is not None:
            moment = min(moment, self._contain_at)
        if self.pidfd is None:
            return self._exit_check_at if moment is None else min(moment, self._exit_check_at)
        return moment

    def close(self) -> None:
        """Release the descriptors; if the run is not over, kill its group first."""
        child = self.child
        if child is None:
            return
        if not self._exited:
            self._kill_group(child.pid)
            self.processes.signal(child.pid, signal.SIGKILL)
            child.wait()
            self._exited = True
        elif self._leftovers_until is not None:
            # The shell is gone, a leftover may not be.
            if _group_exists(child.pid):
                self._kill_group(child.pid)
            self.processes.signal(None, signal.SIGKILL)
        self.processes.release()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        child.close_output()
        self.child = None

    # -- internals -----------------------------------------------------------------------------
    def _stop_early(self, reason: str, now: float) -> None:
        self._reason = reason
        self._signal_group(signal.SIGTERM)
        if self.child is not None:
            self.processes.signal(self.child.pid, signal.SIGTERM)
        self._kill_at = now + self.kill_grace

    def _signal_group(self, sig: int) -> None:
        # The group id is the shell's pid (new session). Until the shell is reaped (a zombie
        # at worst) that id cannot be reused, so this never hits a stranger.
        if self.child is not None and self.child.returncode is None:
            self._kill_group(self.child.pid, sig)

    @staticmethod
    def _kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    def _drain(self, fd: int) -> bool:
        """Read what the pipe holds now; True at end of file."""
        stream = self._streams[fd]
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
            self.live.feed(stream, data)

    def _finish(self, reason: str | None) -> RunResult:
        code = None if self.child is None else self.child.returncode
        output = self._tail.text()
        dropped = self._tail.dropped
        if reason == "timeout":
            error = f"timed out after {self.timeout:g} s"
            return RunResult(Outcome.TIMEOUT, code, output, error, dropped)
        if reason == "shutdown":
            error = "interrupted by a forced shutdown"
            return RunResult(Outcome.INTERRUPTED, code, output, error, dropped)
        if reason == "operator":
            return RunResult(Outcome.CANCELLED, code, output, "cancelled by an operator", dropped)
        if code == 0:
            return RunResult(Outcome.COMPLETED, 0, output, None, dropped)
        return RunResult(Outcome.FAILED, code, output, describe_exit(code or 0), dropped)


class Supervisor:
    """Runs many commands at once from one thread: one poll() over every run's pipe and pidfd,
    and the runs' own timers. One thread serves a whole pool: spawning and reaping from a
    single thread leaves no lock or interpreter hand-over on the way of each job."""

    def __init__(self) -> None:
        # A job must not inherit a descriptor the pool's parent leaked to it; the pool's own
        # descriptors are close-on-exec already.
        seal_inherited_fds()
        sweep_dead_pools()  # the cgroups that pools killed on this host left behind
        self.cgroups = PoolCgroup()  # this pool's runs' cgroups, where there are any
        self._poller = select.poll()
        self._owners: dict[int, Run] = {}
        self.runs: list[Run] = []
        self._watched: set[int] = set()

    def watch(self, fd: int) -> None:
        """Also wake `step()` when this descriptor (a doorbell, a change feed) is readable."""
        self._poller.register(fd, _READABLE)
        self._watched.add(fd)

    def unwatch(self, fd: int) -> None:
        """Stop watching it (before it is closed: its number may come back as a pipe's)."""
        if fd in self._watched:
            self._watched.discard(fd)
            self._poller.unregister(fd)

    def start(self, run: Run) -> None:
        run.start(time.monotonic(), self.cgroups)
        self.runs.append(run)
        child = run.child
        if child is None:
            return  # could not start: it is already finished
        for fd in child.fds:
            self._register(fd, run)
        if run.pidfd is not None:
            self._register(run.pidfd, run)

    def step(self, timeout: float | None) -> tuple[list[Run], list[int]]:
        """Wait at most `timeout` seconds (None: until something happens) for output, exits,
        timers or a watched descriptor. Returns the runs that finished (closed and removed)
        and the watched descriptors that were ready."""
        wait = timeout
        for run in self.runs:
            moment = run.wake_at()
            if moment is not None:
                until = max(0.0, moment - time.monotonic())
                wait = until if wait is None else min(wait, until)
        if any(run.done for run in self.runs):
            wait = 0.0  # failed to start: report it at once
        ready: list[int] = []
        touched: set[int] = set()
        for fd, _ in self._poller.poll(None if wait is None else wait * 1000):
            owner = self._owners.get(fd)
            if owner is None:
                if fd in self._watched:
                    ready.append(fd)
                continue
            touched.add(id(owner))
            if owner.pidfd == fd:
                self._unregister(fd)  # it stays readable once the shell has exited
            elif owner.on_output(fd):
                self._unregister(fd)
        now = time.monotonic()
        finished: list[Run] = []
        remaining: list[Run] = []
        for run in self.runs:
            if not run.done:
                moment = run.wake_at()
                if id(run) in touched or (moment is not None and moment <= now):
                    run.advance(now)
            if run.done:
                self._release(run)
                finished.append(run)
            else:
                remaining.append(run)
        self.runs = remaining
        if finished:
            stop_strays([run.processes for run in self.runs])
        return finished, ready

    def cancel_all(self) -> None:
        now = time.monotonic()
        for run in self.runs:
            run.cancel(now)

    def close(self) -> None:
        """Kill whatever still runs and release every descriptor."""
        for run in self.runs:
            self._release(run)
        self.runs = []
        reap_orphans(pool_orphans())
        self.cgroups.release()

    def _register(self, fd: int, run: Run) -> None:
        self._poller.register(fd, _READABLE)
        self._owners[fd] = run

    def _unregister(self, fd: int) -> None:
        if self._owners.pop(fd, None) is not None:
            self._poller.unregister(fd)

    def _release(self, run: Run) -> None:
        child = run.child
        if child is not None:
            for fd in child.fds:
                self._unregister(fd)
        if run.pidfd is not None:
            self._unregister(run.pidfd)
        run.close()


def _open_pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
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
        fields = procfs.stat_fields(entry)
        if fields is None or len(fields) < 3:
            continue
        if procfs.process_group(fields) == pgid and procfs.is_live(fields):
            return True
    return False


def stop_lost_run(job_id: str, attempt: int, worker_id: str) -> int:
    """Kill this host's processes of one run of a job that was recovered from a lost worker
    (a pool killed with SIGKILL cannot stop its commands, which live in their own sessions).

    They are found by the environment every run carries, which names the job, the run and the
    worker (host, pool pid and number), so neither a later run of the same job, nor a job of
    the same id in another queue, nor any other process matches; a process that left the
    run's session is found the same way. What is left in the cgroups of dead pools is killed
    too. Returns how many processes were killed."""
    wanted = {
        f"QUEUECTL_JOB_ID={job_id}".encode(),
        f"QUEUECTL_ATTEMPT={attempt}".encode(),
        f"QUEUECTL_WORKER={worker_id}".encode(),
    }
    killed: set[int] = set()
    for _ in range(3):  # again, in case one forked while it was being killed
        found = [pid for pid in _proc_pids() if wanted <= environment(pid)]
        fresh = [pid for pid in found if pid not in killed]
        if not fresh:
            break
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.01)  # let the signals land before looking again
    sweep_dead_pools()  # what cleared its environment, where cgroups were used
    return len(killed)


def _proc_pids() -> list[int]:
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    me = os.getpid()
    return [int(entry) for entry in entries if entry.isdigit() and int(entry) != me]


_base_environment: dict[str, str] | None = None


def job_environment(
    job_id: str,
    attempt: int,
    worker_id: str,
    job_type: str | None = None,
    payload: str | None = None,
    own: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The pool's environment, then what the job sets itself (`own`), then the job's identity
    (and a typed job's type and payload), which nothing overrides. The pool's environment is
    read once: decoding os.environ for every job cost a busy pool 5% of its time."""
    global _base_environment
    if _base_environment is None:
        _base_environment = dict(os.environ)
    env = _base_environment.copy()
    if own:
        env.update(own)
    env["QUEUECTL_JOB_ID"] = job_id
    env["QUEUECTL_ATTEMPT"] = str(attempt)
    env["QUEUECTL_WORKER"] = worker_id
    if job_type is not None:
        env["QUEUECTL_JOB_TYPE"] = job_type
        env["QUEUECTL_PAYLOAD"] = "null" if payload is None else payload
    return env
