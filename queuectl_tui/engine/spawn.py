"""Start `/bin/sh -c COMMAND` in a new session with stdout and stderr on pipes of their own
(or on one pipe, where their exact order matters more than telling them apart).

`os.posix_spawn` (vfork and exec in C) costs about half of what `subprocess.Popen` costs in the
parent, and on a busy pool the parent's share is what limits throughput on trivial jobs.
Where posix_spawn cannot start a new session, Popen does the same work.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Mapping

SHELL = "/bin/sh"
# posix_spawn with a new session needs glibc's POSIX_SPAWN_SETSID; elsewhere Popen does it.
_POSIX_SPAWN_SETSID = sys.platform.startswith("linux") and hasattr(os, "posix_spawn")

_devnull_fd: int | None = None


def _devnull() -> int:
    """One read-only /dev/null per process, close-on-exec, for every job's stdin."""
    global _devnull_fd
    if _devnull_fd is None:
        _devnull_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return _devnull_fd


class Child:
    """A started shell: its pid (also its process group id), the read ends of its output
    pipes (`error_fd` is None when stderr shares stdout's pipe), and its exit code once reaped
    (negative: killed by that signal, as subprocess reports)."""

    def __init__(
        self,
        pid: int,
        output_fd: int,
        error_fd: int | None = None,
        popen: subprocess.Popen[bytes] | None = None,
    ):
        self.pid = pid
        self.output_fd = output_fd
        self.error_fd = error_fd
        self.returncode: int | None = None
        self._popen = popen

    @property
    def fds(self) -> tuple[int, ...]:
        return (self.output_fd,) if self.error_fd is None else (self.output_fd, self.error_fd)

    def wait(self) -> int:
        if self.returncode is None:
            if self._popen is not None:
                self.returncode = self._popen.wait()
            else:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def close_output(self) -> None:
        for fd in self.fds:
            os.close(fd)


def _above_stdio(fd: int) -> int:
    """A close-on-exec copy of `fd` numbered 3 or more (dup2 onto itself would keep
    close-on-exec set, and the child would lose that stream)."""
    if fd > 2:
        return fd
    copy = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return copy


def seal_inherited_fds() -> None:
    """Mark every descriptor above stderr close-on-exec, as Popen's close_fds would close
    them: a job must not inherit the pool's log, database or a descriptor its parent leaked.
    Python opens its own descriptors close-on-exec, so this is needed once per process, for
    those inherited from outside."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        names = [str(fd) for fd in range(3, 256)]
    for name in names:
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    os.set_inheritable(fd, False)
            except OSError:
                pass  # the directory listing's own descriptor, already closed


def _stdin_file(data: bytes) -> int:
    """A descriptor that reads `data` and then ends, for a child's stdin: an anonymous file in
    memory (memfd), written before the child starts, so nothing can block on a full pipe and
    no thread has to feed it. Where memfd is missing, a temporary file that is already gone
    from its folder."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("queuectl-payload", os.MFD_CLOEXEC)
    else:  # pragma: no cover - not Linux
        import tempfile

        with tempfile.TemporaryFile() as handle:
            fd = os.dup(handle.fileno())
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return _above_stdio(fd)


def _pipe() -> tuple[int, int]:
    read_fd, write_fd = os.pipe()  # both ends close-on-exec (PEP 446)
    return _above_stdio(read_fd), _above_stdio(write_fd)


def spawn_shell(
    command: str,
    env: Mapping[str, str],
    stdin: bytes | None = None,
    separate_stderr: bool = True,
    cwd: str | None = None,
) -> Child:
    """Start the command, with `stdin` on its standard input (else /dev/null), in `cwd` if
    given; raises OSError if the shell cannot be started (or `cwd` entered)."""
    opened: list[int] = []  # every descriptor made here; the child's ends close after spawn
    try:
        read_fd, write_fd = _pipe()
        opened += (read_fd, write_fd)
        error_read, error_write = _pipe() if separate_stderr else (None, write_fd)
        if error_read is not None:
            opened += (error_read, error_write)
        input_fd = None if stdin is None else _stdin_file(stdin)
        if input_fd is not None:
            opened.append(input_fd)
        # os.posix_spawn cannot change directory: a job with one of its own goes through Popen.
        if not _POSIX_SPAWN_SETSID or cwd is not None:
            process = _popen(command, env, write_fd, error_write, input_fd, cwd)
            child = Child(process.pid, read_fd, error_read, process)
        else:
            pid = os.posix_spawn(
                SHELL,
                [SHELL, "-c", command],
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, _devnull() if input_fd is None else input_fd, 0),
                    (os.POSIX_SPAWN_DUP2, write_fd, 1),
                    (os.POSIX_SPAWN_DUP2, error_write, 2),
                ],
                setsid=True,
                # Python ignores SIGPIPE and SIGXFSZ; a job must get them back, as Popen does
                # (or `yes | head -1` fails with a broken pipe instead of ending quietly).
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            )
            child = Child(pid, read_fd, error_read)
    except BaseException:
        for fd in opened:
            os.close(fd)
        raise
    for fd in opened:
        if fd not in child.fds:
            os.close(fd)
    return child


def _popen(
    command: str,
    env: Mapping[str, str],
    write_fd: int,
    error_fd: int,
    input_fd: int | None,
    cwd: str | None = None,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [SHELL, "-c", command],
        stdin=subprocess.DEVNULL if input_fd is None else input_fd,
        stdout=write_fd,
        stderr=error_fd,
        start_new_session=True,
        env=env,
        close_fds=True,
        cwd=cwd,
    )
