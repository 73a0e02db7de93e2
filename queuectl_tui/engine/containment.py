"""Every process a run starts ends with the run, even one that left its process group.

A command that calls `setsid` (a daemon, `setsid sleep 300 &`) leaves the run's process group,
so signalling the group does not reach it. Two mechanisms find such processes:

- The pool process is a child subreaper (PR_SET_CHILD_SUBREAPER): an orphaned descendant of a
  run becomes a child of the pool instead of init. Each run's environment names its job, run
  number and worker, so the pool's orphans are told apart by /proc/PID/environ. When the
  pool has no orphans (the common case) a run's end costs one read of the pool's children.
- Where a writable cgroup v2 hierarchy exists, a run that is still running after
  CGROUP_AFTER seconds is moved, with every descendant it has by then, into a cgroup of its
  own, which is killed as a whole. This also catches a descendant that clears its
  environment. A run that ends sooner costs no cgroup at all (a cgroup per run would add
  about a fifth to the pool's CPU per trivial job). The run cgroups of a pool that died are
  killed by the next pool that proves it dead (see the cgroup section below).

The orphans the pool gains are reaped here as well, so that no zombie accumulates.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import resource
import secrets
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..config import ConfigError, Settings
from ..location import absolute
from . import events, procfs
from .identity import pool_id

CGROUPS_ENV = "QUEUECTL_CGROUPS"  # "off": never use cgroups, only the subreaper path
CGROUP_AFTER = 0.2  # seconds a run runs before it gets a cgroup of its own
MARKER_NAMES = ("QUEUECTL_JOB_ID", "QUEUECTL_ATTEMPT", "QUEUECTL_WORKER")
_PR_SET_CHILD_SUBREAPER = 36
_POOL_DIR_PREFIX = "queuectl-"

# Descriptors one run holds in the pool: its output pipe and its pidfd, plus the pipe's write
# end while it starts.
FDS_PER_RUN = 3
# The pool's own descriptors beyond those open when it starts: database connections of the
# dispatcher and the pool's other threads (a file, its -wal and -shm each), inotify, pipes,
# /dev/null.
FDS_FOR_THE_POOL = 32

_log = logging.getLogger("queuectl")
_subreaper = False


class PoolLimitError(ConfigError, OSError):
    """The pool cannot run this many workers within the process's limits: a refused setting
    (the CLI exits 2) and a limit of the system (the console reports OSErrors)."""


# -- the pool process ----------------------------------------------------------------------


def prepare_pool_process(settings: Settings, count: int) -> None:
    """What a pool process sets up before it starts: enough descriptors for `count` runs,
    the subreaper, and the database its jobs see in QUEUECTL_DB."""
    ensure_descriptors(count)
    become_subreaper()
    set_job_database(settings.database)


def ensure_descriptors(count: int) -> None:
    """Raise the soft RLIMIT_NOFILE to what `count` workers need if the hard limit allows;
    refuse otherwise, rather than fail jobs with "Too many open files" later."""
    needed = _open_descriptors() + FDS_FOR_THE_POOL + FDS_PER_RUN * count
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard == resource.RLIM_INFINITY or hard >= needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        return
    fits = (hard - _open_descriptors() - FDS_FOR_THE_POOL) // FDS_PER_RUN
    advice = f"raise the limit or start at most {fits} workers" if fits > 0 else "raise it"
    raise PoolLimitError(
        f"a pool of {count} workers needs about {needed} open files but the limit is {hard} "
        f"(ulimit -n); {advice}"
    )


def _open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 16


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux 3.4+)."""
    global _subreaper
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _subreaper = False
    return _subreaper


def set_job_database(database: str) -> None:
    """Jobs see the pool's database in QUEUECTL_DB, so `queuectl enqueue` run by a job adds to
    the queue that runs it. Set in this process's environment, which every job inherits."""
    os.environ["QUEUECTL_DB"] = absolute(database)


# -- a run's processes ---------------------------------------------------------------------


def run_markers(env: Mapping[str, str]) -> frozenset[bytes] | None:
    """The environment entries that identify one run, or None if `env` has none."""
    if not all(name in env for name in MARKER_NAMES):
        return None
    return frozenset(f"{name}={env[name]}".encode() for name in MARKER_NAMES)


_children_fd: tuple[int, int] | None = None  # (pid, descriptor): kept open, read with pread


def pool_orphans() -> list[int]:
    """Orphans adopted by this process: children of its main thread, which the kernel picks
    as the reaper (the runs' shells are children of the dispatcher thread instead). Read
    through a descriptor kept open: this runs at the end of every run."""
    global _children_fd
    pid = os.getpid()
    if _children_fd is None or _children_fd[0] != pid:
        try:
            fd = os.open(f"/proc/{pid}/task/{pid}/children", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return []
        _children_fd = (pid, fd)
    size = 4096
    while True:
        try:
            data = os.pread(_children_fd[1], size, 0)
        except OSError:
            return []
        if len(data) < size:
            return [int(child) for child in data.split()]
        size *= 4


def _children(pid: int, tid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
            return [int(child) for child in handle.read().split()]
    except OSError:
        return []


def _all_children(pid: int) -> list[int]:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tids:
        found += _children(pid, int(tid))
    return found


def descendants(roots: Iterable[int]) -> set[int]:
    """The roots and every process below them, from /proc/PID/task/TID/children."""
    found: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo += _all_children(pid)
    return found


def environment(pid: int) -> set[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return set(handle.read().split(b"\0"))
    except OSError:
        return set()


def reap_orphans(orphans: Iterable[int]) -> None:
    """Collect the exit status of adopted orphans that have ended. Only a subreaper does
    this: elsewhere the main thread's children belong to whoever started them."""
    if not _subreaper:
        return
    for pid in orphans:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def stop_strays(running: Iterable[RunProcesses]) -> None:
    """Kill the pool's orphans that carry the environment of one of this pool's runs that is
    over (one forked just as its run's processes were killed): no run is left to stop them.
    Only in a subreaper, where every orphan of the main thread comes from a run of this pool;
    costs one read when there is none."""
    if not _subreaper:
        return
    orphans = pool_orphans()
    if not orphans:
        return
    reap_orphans(orphans)
    ours = f"QUEUECTL_WORKER={pool_id()}:".encode()
    live = [processes.markers for processes in running]
    for pid in orphans:
        env = environment(pid)
        if not any(entry.startswith(ours) for entry in env):
            continue  # not from this pool's runs, or it cleared its environment
        if any(markers is not None and markers <= env for markers in live):
            continue  # its run is still running
        _signal(descendants([pid]), signal.SIGKILL)


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _is_live(pid: int) -> bool:
    fields = procfs.stat_fields(pid)
    return fields is not None and procfs.is_live(fields)


class RunProcesses:
    """The processes of one run outside the shell's process group (the group is signalled
    by the runner): its descendants while the shell lives, the pool's orphans that carry the
    run's environment, and, once made, its cgroup."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        self._markers: frozenset[bytes] | bool | None = False  # False: not computed yet
        self.cgroup: Path | None = None
        self._escaped = False  # something of the run was outside the group at the last look

    @property
    def markers(self) -> frozenset[bytes] | None:
        # Computed when first needed: most runs never need them.
        if self._markers is False:
            self._markers = run_markers(self._env)
        return self._markers if isinstance(self._markers, frozenset) else None

    def members(self, shell: int | None) -> set[int]:
        """Every live process of the run found now (the shell included while it lives)."""
        roots = [shell] if shell is not None else []
        orphans = pool_orphans()
        if orphans:
            reap_orphans(orphans)
            roots += [pid for pid in orphans if self._is_mine(pid)]
        found = descendants(roots) if roots else set()
        if self.cgroup is not None:
            found |= cgroup_members(self.cgroup)
        found.discard(os.getpid())
        return {pid for pid in found if _is_live(pid)}

    def _is_mine(self, pid: int) -> bool:
        return self.markers is not None and self.markers <= environment(pid)

    def signal(self, shell: int | None, sig: int) -> None:
        """Send `sig` to every process of the run; KILL also kills the cgroup as a whole."""
        if self.cgroup is not None and sig == signal.SIGKILL:
            kill_cgroup(self.cgroup)
        members = self.members(shell)
        self._escaped = bool(members - ({shell} if shell is not None else set()))
        _signal(members, sig)

    def after_exit(self) -> None:
        """The shell has exited: TERM whatever of the run it left outside its group. When
        the pool has no orphans and the run has no cgroup, this is one read."""
        if self.cgroup is None and not pool_orphans():
            self._escaped = False
            return
        self.signal(None, signal.SIGTERM)

    def alive(self) -> bool:
        """True while a process of the run outside its group lives (after the shell's exit)."""
        if not self._escaped and self.cgroup is None:
            return False
        self._escaped = bool(self.members(None))
        return self._escaped

    def contain(self, shell: int, cgroups: PoolCgroup) -> None:
        """Move the run, with every descendant found now, into a cgroup of its own (one of
        its pool's `cgroups`)."""
        if self.cgroup is not None:
            return
        cgroup = cgroups.new_run()
        if cgroup is None:
            return
        self.cgroup = cgroup
        for _ in range(3):  # again for those forked while the others moved
            outside = self.members(shell) - cgroup_members(cgroup)
            if not outside:
                break
            for pid in outside:
                move_to_cgroup(cgroup, pid)

    def release(self) -> None:
        """Remove the run's cgroup once it is empty (a later sweep removes it otherwise)."""
        if self.cgroup is not None and remove_cgroup(self.cgroup):
            self.cgroup = None


# -- cgroup v2 -----------------------------------------------------------------------------
#
# Each pool process makes one directory under its own cgroup, queuectl-pool-TOKEN (TOKEN is
# random: pids repeat across PID namespaces and over time), and holds an exclusive flock on
# it for as long as the directory exists. The kernel drops the lock when the pool dies
# however it dies, and the lock lives on the cgroup's inode, so every namespace and mount
# sees the same one. A pool sweeps another pool's directory only after taking that lock
# itself: proof that its owner is gone, which no pid looked up in /proc can give.

_parent: Path | bool | None = False  # False: not looked for yet
_POOL_PREFIX = f"{_POOL_DIR_PREFIX}pool-"
_PROBE_PREFIX = f"{_POOL_DIR_PREFIX}probe-"


def cgroup_parent() -> Path | None:
    """The cgroup this process is in, if it lies in a writable cgroup v2 hierarchy that
    can kill a cgroup as a whole (cgroup.kill, Linux 5.14+) and lock a directory (flock),
    and QUEUECTL_CGROUPS is not "off"."""
    global _parent
    if _parent is False:
        # Looked up once per process: this runs at the start of every run.
        off = os.environ.get(CGROUPS_ENV, "").lower() in ("off", "0", "no", "false")
        _parent = None if off else _find_cgroup_parent()
    return _parent if isinstance(_parent, Path) else None


def _find_cgroup_parent() -> Path | None:
    mount = _cgroup2_mount()
    if mount is None:
        return None
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            own = next(line[3:].strip() for line in handle if line.startswith("0::"))
    except (OSError, StopIteration):
        return None
    parent = mount / own.lstrip("/")
    made = _make_locked_dir(parent, _PROBE_PREFIX)
    if made is None:
        return None
    probe, lock = made
    usable = (probe / "cgroup.kill").exists()
    with contextlib.suppress(OSError):
        probe.rmdir()
    os.close(lock)
    return parent if usable else None


def _cgroup2_mount() -> Path | None:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            for line in handle:
                before, _, after = line.partition(" - ")
                if after.split()[:1] == ["cgroup2"]:
                    return Path(before.split()[4])
    except (OSError, IndexError):
        pass
    return None


def _make_locked_dir(parent: Path, prefix: str) -> tuple[Path, int] | None:
    """A new directory PREFIX+TOKEN under `parent`, created and locked by this process; None
    where no directory can be made or locked there (then nothing could prove it ours)."""
    for _ in range(8):
        path = parent / f"{prefix}{secrets.token_hex(8)}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError:
            return None
        lock = _lock_dir(path)
        if lock is None:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        if lock < 0:
            continue  # a sweep took it between mkdir and flock: it removes it, try another
        try:
            # A sweep may have removed it after mkdir and before our flock.
            still_there = os.stat(path).st_ino == os.fstat(lock).st_ino
        except OSError:
            still_there = False
        if still_there:
            return path, lock
        os.close(lock)
    return None


def _lock_dir(path: Path) -> int | None:
    """The descriptor of `path` with an exclusive flock on it; -1 when another process holds
    the lock; None when the directory cannot be opened or locked at all."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return -1
    except OSError:
        os.close(fd)
        return None
    return fd


class PoolCgroup:
    """A pool's own cgroup directory (its Supervisor's), made when its first run needs a
    cgroup and locked for as long as it exists, holding a cgroup per run: run-1, run-2, …"""

    def __init__(self) -> None:
        self._dir: Path | None = None
        self._lock: int | None = None  # the descriptor holding the flock on the directory
        self._pid = 0  # the process that made it (a forked child makes its own)
        self._runs = 0

    def new_run(self) -> Path | None:
        """A fresh cgroup under the pool's directory, or None if none can be made."""
        if self._dir is None or self._pid != os.getpid():
            parent = cgroup_parent()
            if parent is None:
                return None
            made = _make_locked_dir(parent, _POOL_PREFIX)
            if made is None:
                return None
            self._dir, self._lock = made
            self._pid = os.getpid()
        self._runs += 1
        cgroup = self._dir / f"run-{self._runs}"
        try:
            cgroup.mkdir()
        except OSError:
            return None
        return cgroup

    def release(self) -> None:
        """Remove the pool's directory once no run uses it, and let go of its lock."""
        if self._dir is None or self._pid != os.getpid() or not remove_cgroup(self._dir):
            return
        if self._lock is not None:
            os.close(self._lock)
        self._dir = self._lock = None


def move_to_cgroup(cgroup: Path, pid: int) -> bool:
    try:
        with open(cgroup / "cgroup.procs", "w", encoding="ascii") as handle:
            handle.write(str(pid))
    except OSError as error:
        if error.errno != errno.ESRCH:
            _log.debug("could not move %s into %s: %s", pid, cgroup, error)
        return False
    return True


def cgroup_members(cgroup: Path) -> set[int]:
    try:
        with open(cgroup / "cgroup.procs", "rb") as handle:
            return {int(pid) for pid in handle.read().split()}
    except OSError:
        return set()


def kill_cgroup(cgroup: Path) -> None:
    with contextlib.suppress(OSError), open(cgroup / "cgroup.kill", "w", encoding="ascii") as f:
        f.write("1")


def remove_cgroup(cgroup: Path) -> bool:
    """rmdir the cgroup if it is empty; True once it is gone."""
    try:
        cgroup.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def sweep_pool_cgroup(pool_dir: Path) -> int:
    """Kill what is left in a dead pool's cgroups and remove them; returns how many
    processes were still there. The caller holds the directory's lock."""
    try:
        runs = [entry for entry in pool_dir.iterdir() if entry.is_dir()]
    except OSError:
        return 0
    left = 0
    for run in runs:
        left += len(cgroup_members(run))
        kill_cgroup(run)
    for run in runs:
        for _ in range(100):  # cgroup.kill is asynchronous: wait for the cgroup to empty
            if remove_cgroup(run):
                break
            time.sleep(0.005)
    remove_cgroup(pool_dir)
    return left


def sweep_dead_pools() -> int:
    """Remove the cgroups of dead pools that share this pool's parent cgroup, killing what is
    left in them: only directories whose lock this process can take, so whose owner is gone.
    Returns how many processes were killed."""
    parent = cgroup_parent()
    if parent is None:
        return 0
    try:
        # This process's own pools are passed over for their locks, as live pools are.
        entries = [
            entry
            for entry in parent.iterdir()
            if entry.name.startswith((_POOL_PREFIX, _PROBE_PREFIX))
        ]
    except OSError:
        return 0
    killed = 0
    for entry in entries:
        lock = _lock_dir(entry)
        if lock is None or lock < 0:
            continue  # its pool lives (or it is gone already)
        try:
            left = sweep_pool_cgroup(entry)
        finally:
            os.close(lock)
        if left:
            events.event(
                "killed what a dead pool left",
                level=logging.WARNING,
                cgroup=str(entry),
                killed=left,
            )
        killed += left
    return killed
