"""Whether a worker's pool is alive: in this PID namespace by its process (and that the pid
was not reused by a newer one), elsewhere by its heartbeats. /proc knowledge, loaded only by
what needs it."""

from __future__ import annotations

from ..models import ACTIVE_WORKER_STATUSES, Worker, WorkerStatus
from ..timeutil import now_ms
from . import procfs
from .identity import same_pid_namespace
from .procfs import pid_alive


def worker_is_running(worker: Worker, stale_after_s: float, now: int) -> bool:
    """Whether an active worker row belongs to a live pool: in this PID namespace its process
    must exist (and not be a newer process that reused the pid); elsewhere (another host, a
    container, an unshared namespace) its heartbeat must be fresh."""
    if worker.status not in ACTIVE_WORKER_STATUSES:
        return False
    if same_pid_namespace(worker.pid_namespace):
        return pid_alive(worker.pid) and not pid_reused(worker, now)
    return not worker.is_stale(now, stale_after_s)


def pid_reused(worker: Worker, now: int) -> bool:
    """Whether the process now holding the worker's pid is newer than the worker. /proc tells
    start times by this host's clock, the row by the store's (`now` is read from it): they
    are compared by the row's age, which both clocks agree on."""
    return started_after(worker.pid, now_ms() - (now - worker.started_at))


def started_after(pid: int, moment_ms: int) -> bool:
    """True if process `pid` started more than a second after `moment_ms` (epoch ms): a pid
    reused by a newer process. False when unknown (no /proc)."""
    fields = procfs.stat_fields(pid)
    try:
        with open("/proc/stat", "rb") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith(b"btime "))
    except (OSError, StopIteration, ValueError):
        return False
    if fields is None:
        return False
    started_ms = (boot + procfs.ticks_to_seconds(procfs.start_ticks(fields))) * 1000
    return started_ms > moment_ms + 1000


def process_started_ms(pid: int | None = None) -> int | None:
    """When a process (default: this one) started, in epoch ms, to about 10 ms: its age from
    /proc (start time and uptime share the boot clock) subtracted from now. None if unknown."""
    fields = procfs.stat_fields(pid or "self")
    try:
        with open("/proc/uptime", "rb") as handle:
            uptime = float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if fields is None:
        return None
    age_s = uptime - procfs.ticks_to_seconds(procfs.start_ticks(fields))
    return now_ms() - max(0, round(age_s * 1000))


def worker_shown_status(worker: Worker, stale_after_s: float, now: int) -> WorkerStatus:
    """The status to show: HUNG for an active worker whose pool runs in this PID namespace
    yet has been silent for longer than the stale timeout (frozen, or its dispatcher hangs)."""
    if not worker.is_stale(now, stale_after_s) or not same_pid_namespace(worker.pid_namespace):
        return worker.status
    if pid_alive(worker.pid) and not pid_reused(worker, now):
        return WorkerStatus.HUNG
    return worker.status
