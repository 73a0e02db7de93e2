"""A worker pool: N workers in one process, plus the pool's own duties.

The main thread registers the workers, then loops over the pool's duties: heartbeats (idle or
busy), reaping lost workers and recovering their jobs, watching for `queuectl worker stop`,
replacing the dispatcher if it crashed, and reacting to signals. The dispatcher thread runs
the workers' jobs (see dispatch.py); a watcher thread rings it when the database changes (see
wake.py).

Stopping: the first SIGINT/SIGTERM (or a stop request in the database) stops claiming and lets
running jobs finish; the second kills the running process groups and hands their jobs back
without spending an attempt; a third exits at once (the next pool recovers what was running).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import Settings
from ..models import ACTIVE_WORKER_STATUSES, Job, JobState, Worker, WorkerStatus
from ..store import Store, StoreError, open_store
from ..timeutil import human_seconds, now_ms, to_iso
from . import events
from .containment import ensure_descriptors, prepare_pool_process
from .dispatch import Dispatcher, PoolContext
from .retry import retry_store_call
from .runner import stop_lost_run
from .wake import ChangeWatcher, Doorbell

REAP_INTERVAL = 1.0  # seconds between checks for lost workers
STOP_CHECK_INTERVAL = 0.5  # seconds between checks for a `worker stop` request
PRUNE_AFTER_MS = 7 * 86_400_000  # stopped and lost workers are forgotten after a week
# The dispatcher gives up on a locked database after this long and tries again later, so that
# a long write elsewhere (a huge bulk enqueue) never stalls the supervision of running jobs.
DISPATCH_LOCK_WAIT = 0.05
WAKE_MODE_ENV = "QUEUECTL_WAKE"  # how idle workers learn of new work (see wake.py)
WAKE_MODES = ("auto", "inotify", "poll")

EXIT_OK = 0
EXIT_FORCED = 130


@dataclass(frozen=True, slots=True)
class PoolOptions:
    count: int
    log_format: str = "human"


@dataclass(frozen=True, slots=True)
class Detached:
    pid: int
    log_path: str


def pid_alive(pid: int) -> bool:
    """True if a process with this pid runs on this host (a zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")


def worker_is_running(worker: Worker, stale_after_s: float, now: int) -> bool:
    """Whether an active worker row belongs to a live pool: on this host its process must
    exist (and not be a newer process that reused the pid); elsewhere its heartbeat must be
    fresh."""
    if worker.status not in ACTIVE_WORKER_STATUSES:
        return False
    if worker.host == socket.gethostname():
        return pid_alive(worker.pid) and not started_after(worker.pid, worker.started_at)
    return not worker.is_stale(now, stale_after_s)


def started_after(pid: int, moment_ms: int) -> bool:
    """True if process `pid` started more than a second after `moment_ms` (epoch ms): a pid
    reused by a newer process. False when unknown (no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
        with open("/proc/stat", "rb") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith(b"btime "))
    except (OSError, StopIteration, ValueError):
        return False
    ticks = int(stat[stat.rfind(b")") + 2 :].split()[19])  # field 22: start time since boot
    started_ms = (boot + ticks / os.sysconf("SC_CLK_TCK")) * 1000
    return started_ms > moment_ms + 1000


class Pool:
    def __init__(self, settings: Settings, options: PoolOptions, wake_mode: str = "auto") -> None:
        self.settings = settings
        self.options = options
        self.wake_mode = wake_mode
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.pool_id = f"{self.host}:{self.pid}"
        self.started_at = 0
        self.dispatcher: Dispatcher | None = None
        self._next_index = 1
        self._signals = 0
        self._stop_reason: str | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.ctx: PoolContext | None = None

    # -- control, from signal handlers or other threads -------------------------------------
    def request_stop(self, reason: str = "requested") -> None:
        """First call: stop gracefully. Second call: force (cancel running jobs)."""
        self._signals += 1
        if self._stop_reason is None:
            self._stop_reason = reason
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"!")

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self._signals >= 2:
            # Third signal: leave now, taking the running commands down with us. Their jobs
            # stay `processing` under workers whose process is gone; the next pool on this
            # host recovers them at once (the interrupted attempt counts).
            dispatcher = self.dispatcher
            for pid in dispatcher.running_pids() if dispatcher is not None else []:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            os.write(2, b"queuectl: exiting immediately\n")
            os._exit(EXIT_FORCED)
        self.request_stop(signal.Signals(signum).name)

    # -- the pool ------------------------------------------------------------------------------
    def run(self, install_signals: bool = True) -> int:
        settings = self.settings
        store = open_store(settings.database_path)  # fails early, before any thread starts
        previous: dict[int, object] = {}
        try:
            if install_signals:
                for signum in (signal.SIGINT, signal.SIGTERM):
                    previous[signum] = signal.signal(signum, self._on_signal)
            return self._run(store)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)  # type: ignore[arg-type]
            store.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _run(self, store: Store) -> int:
        settings = self.settings
        self.started_at = now_ms()
        doorbell = Doorbell()
        path = settings.database_path
        watcher = ChangeWatcher(lambda: open_store(path), path, doorbell, self.wake_mode)
        self.ctx = ctx = PoolContext(
            settings=settings,
            pid=self.pid,
            open_store=lambda: open_store(path, lock_wait=DISPATCH_LOCK_WAIT),
            doorbell=doorbell,
            watcher=watcher,
        )
        # Predecessors first: a dead pool that had our pid used our worker ids.
        self._reap(store, startup=True)
        with contextlib.suppress(StoreError):
            store.prune_workers(self.started_at - PRUNE_AFTER_MS)
        dispatcher = self._start_dispatcher(store)
        watcher.start()
        events.event(
            "pool started",
            pool=self.pool_id,
            workers=self.options.count,
            database=str(Path(path).resolve()),
            wake=watcher.mode,
        )
        now = time.monotonic()
        next_beat = now + settings.heartbeat_interval
        next_reap = now + REAP_INTERVAL
        next_stop_check = now
        graceful_started = False
        try:
            while True:
                if self._signals >= 1 and not graceful_started:
                    graceful_started = True
                    self._begin_stop(store, self._stop_reason or "requested")
                if self._signals >= 2 and not ctx.forced.is_set():
                    self._force(self._stop_reason or "requested")
                if ctx.draining.is_set() and not dispatcher.is_alive():
                    break
                now = time.monotonic()
                if not ctx.draining.is_set() and not dispatcher.is_alive():
                    dispatcher = self._replace_crashed(store, dispatcher)
                if now >= next_beat:
                    next_beat = now + settings.heartbeat_interval
                    self._heartbeat(store)
                if now >= next_reap:
                    next_reap = now + REAP_INTERVAL
                    self._reap(store)
                if now >= next_stop_check:
                    next_stop_check = now + STOP_CHECK_INTERVAL
                    if not ctx.draining.is_set():
                        self._check_stop_request(store)
                wait = min(next_beat, next_reap, next_stop_check) - time.monotonic()
                if ctx.draining.is_set():
                    wait = min(wait, 0.05)  # watch the dispatcher finish
                self._sleep(max(0.0, wait))
        finally:
            ctx.draining.set()
            doorbell.ring()
            watcher.stop()
            dispatcher.join(timeout=5)
            watcher.join(timeout=2)
            self._mark_all_stopped(store)
            if not dispatcher.is_alive():
                doorbell.close()
        return self._finish()

    def _sleep(self, seconds: float) -> None:
        """Sleep until the next duty or a stop request (signals also write to the pipe)."""
        try:
            ready, _, _ = select.select([self._wake_r], [], [], seconds)
        except InterruptedError:
            return
        if ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 1024)

    # -- workers -----------------------------------------------------------------------------
    def _start_dispatcher(self, store: Store) -> Dispatcher:
        assert self.ctx is not None
        now = now_ms()
        rows = []
        for _ in range(self.options.count):
            rows.append(
                Worker(
                    id=f"{self.pool_id}:{self._next_index}",
                    pool_id=self.pool_id,
                    pid=self.pid,
                    host=self.host,
                    status=WorkerStatus.IDLE,
                    started_at=now,
                    last_heartbeat=now,
                    stopped_at=None,
                    current_job=None,
                    jobs_done=0,
                    jobs_failed=0,
                )
            )
            self._next_index += 1
        retry_store_call("register the workers", lambda: store.register_workers(rows))
        self.dispatcher = Dispatcher([row.id for row in rows], self.ctx)
        self.dispatcher.start()
        return self.dispatcher

    def _replace_crashed(self, store: Store, crashed: Dispatcher) -> Dispatcher:
        """The dispatcher died of a bug: its workers are stopped, and what it could not record
        is recovered (the failure path) before fresh workers take over."""
        self._recover(store, [])
        replacement = self._start_dispatcher(store)
        for old, new in zip(crashed.worker_ids, replacement.worker_ids, strict=True):
            events.event("worker replaced", level=logging.WARNING, worker=old, replacement=new)
        return replacement

    def _active_ids(self) -> list[str]:
        dispatcher = self.dispatcher
        if dispatcher is None or not dispatcher.is_alive():
            return []
        return dispatcher.worker_ids

    def _heartbeat(self, store: Store) -> None:
        ids = self._active_ids()
        if not ids:
            return
        try:
            store.heartbeat(ids, now_ms())
            mine = set(ids)
            lost = [
                w
                for w in store.list_workers(active_only=False)
                if w.id in mine and w.status is WorkerStatus.LOST
            ]
        except StoreError as error:
            events.event("heartbeat failed", level=logging.WARNING, error=str(error))
            return
        if lost:
            # Another pool missed our heartbeats (a stalled host, a long lock) and took our
            # jobs back; carry on under the same ids, marked alive again.
            now = now_ms()
            status = self.dispatcher.current_jobs() if self.dispatcher is not None else {}
            for worker in lost:
                events.event(
                    "worker declared lost by another pool, re-registering",
                    level=logging.WARNING,
                    worker=worker.id,
                )
                job = status.get(worker.id)
                revived = replace(
                    worker,
                    status=WorkerStatus.BUSY if job else WorkerStatus.IDLE,
                    last_heartbeat=now,
                    stopped_at=None,
                    current_job=job,
                )
                retry_store_call(
                    "re-register a worker", lambda r=revived: store.register_workers([r])
                )

    # -- recovery ----------------------------------------------------------------------------
    def _reap(self, store: Store, startup: bool = False) -> None:
        """Mark lost the workers that are gone (same-host dead PIDs at once, any host after
        stale_worker_timeout without a heartbeat) and recover their jobs."""
        now = now_ms()
        mine = set(self.dispatcher.worker_ids if self.dispatcher is not None else [])
        try:
            active = store.list_workers(active_only=True)
        except StoreError as error:
            events.event("reaper failed", level=logging.WARNING, error=str(error))
            return
        dead: list[str] = []
        for worker in active:
            if worker.id in mine:
                continue
            if worker.host == self.host:
                # Here the process table is the truth: a live pool whose heartbeat lags behind
                # a long write (a huge bulk enqueue holds the lock) is not lost.
                if worker.pid != self.pid and pid_alive(worker.pid):
                    if not started_after(worker.pid, worker.started_at):
                        continue
                    reason = f"process {worker.pid} is a new process (the pid was reused)"
                else:
                    reason = f"process {worker.pid} is gone"
            elif worker.is_stale(now, self.settings.stale_worker_timeout):
                silent = human_seconds((now - worker.last_heartbeat) / 1000)
                reason = f"no heartbeat for {silent}"
            else:
                continue
            dead.append(worker.id)
            events.event("worker lost", level=logging.WARNING, worker=worker.id, reason=reason)
        if dead or startup:
            self._recover(store, dead)

    def _recover(self, store: Store, dead: list[str]) -> None:
        settings = self.settings
        try:
            jobs = store.recover_orphans(
                dead, settings.backoff_base, settings.max_backoff, now_ms()
            )
        except StoreError as error:
            events.event("recovery failed, will retry", level=logging.WARNING, error=str(error))
            return
        for job in jobs:
            if self.ctx is not None:
                self.ctx.totals.add("recovered")
            fields: dict[str, object] = {"job": job.id, "state": job.state.value}
            # The lost run may still be running here, orphaned: stop it before the job runs
            # again, so two runs of one job never overlap on this host.
            lost_by = self._lost_worker(store, job)
            if lost_by is not None:
                fields["stopped_processes"] = stop_lost_run(job.id, job.runs, lost_by) or None
            if job.state is JobState.FAILED:
                fields["run_at"] = to_iso(job.run_at)
                if self.ctx is not None and self.ctx.watcher is not None:
                    self.ctx.watcher.schedule(job.run_at)
            events.event("recovered", **fields, error=job.last_error)
            if job.state is JobState.DEAD:
                events.event("dead", job=job.id, attempts=job.attempts, error=job.last_error)

    @staticmethod
    def _lost_worker(store: Store, job: Job) -> str | None:
        """The worker of the run just recorded as lost (the job row no longer names it)."""
        try:
            history = store.attempts(job.id)
        except StoreError:
            return None
        return history[-1].worker_id if history else None

    # -- stopping ----------------------------------------------------------------------------
    def _check_stop_request(self, store: Store) -> None:
        try:
            requested = store.stop_requested_since(self.started_at)
        except StoreError:
            return
        if requested:
            self.request_stop("queuectl worker stop")

    def _begin_stop(self, store: Store, reason: str) -> None:
        assert self.ctx is not None
        self.ctx.draining.set()
        self.ctx.doorbell.ring()
        jobs = self.dispatcher.current_jobs() if self.dispatcher is not None else {}
        busy = [(worker_id, job_id) for worker_id, job_id in jobs.items() if job_id]
        events.event(
            "pool stopping",
            reason=reason,
            running_jobs=len(busy),
            hint="send the signal again to cancel running jobs" if busy else None,
        )
        now = now_ms()
        for worker_id, job_id in busy:
            with contextlib.suppress(StoreError):
                store.set_worker_status(worker_id, WorkerStatus.STOPPING, job_id, now)

    def _force(self, reason: str) -> None:
        assert self.ctx is not None
        self.ctx.forced.set()
        self.ctx.doorbell.ring()
        running = self.dispatcher.running_pids() if self.dispatcher is not None else []
        events.event("pool cancelling running jobs", reason=reason, running_jobs=len(running))

    def _mark_all_stopped(self, store: Store) -> None:
        now = now_ms()
        for worker_id in self.dispatcher.worker_ids if self.dispatcher is not None else []:
            with contextlib.suppress(StoreError):
                store.set_worker_status(worker_id, WorkerStatus.STOPPED, None, now)

    def _finish(self) -> int:
        assert self.ctx is not None
        totals = self.ctx.totals
        forced = self.ctx.forced.is_set()
        events.event(
            "pool stopped",
            pool=self.pool_id,
            completed=totals.completed,
            failed=totals.failed,
            dead=totals.dead,
            cancelled=totals.cancelled,
            recovered=totals.recovered,
            uptime=human_seconds((now_ms() - self.started_at) / 1000),
        )
        return EXIT_FORCED if forced else EXIT_OK


def run_pool(settings: Settings, options: PoolOptions) -> int:
    """Run a pool in the foreground until it is stopped; 0 after a graceful stop."""
    events.configure(options.log_format)
    wake_mode = os.environ.get(WAKE_MODE_ENV, "auto")
    if wake_mode not in WAKE_MODES:
        events.event(
            "unknown wake mode, using auto",
            level=logging.WARNING,
            variable=WAKE_MODE_ENV,
            value=wake_mode,
            known="/".join(WAKE_MODES),
        )
        wake_mode = "auto"
    prepare_pool_process(settings, options.count)
    return Pool(settings, options, wake_mode).run(install_signals=True)


def log_path_for(database_path: str) -> Path:
    database = Path(database_path).expanduser().resolve()
    return database.with_name(database.name + ".workers.log")


def pool_command(
    database: str | Path, options: PoolOptions, config_path: str | Path | None = None
) -> list[str]:
    """The command line of `queuectl worker start` for a pool of another process."""
    command = [sys.executable, "-m", "queuectl_tui"]
    if config_path is not None:
        command += ["--config", str(config_path)]
    command += ["--db", str(database), "worker", "start", "--count", str(options.count)]
    return [*command, "--log-format", options.log_format]


def start_detached(settings: Settings, options: PoolOptions, config_path: str | None) -> Detached:
    """Start `queuectl worker start` in the background (its own session, so a closing
    terminal or console does not stop it); output goes to a log file beside the database."""
    ensure_descriptors(options.count)  # refuse here, not in a log nobody reads
    database = str(Path(settings.database_path).expanduser().resolve())
    log_path = log_path_for(database)
    config = str(Path(config_path).expanduser().resolve()) if config_path else None
    command = pool_command(database, options, config)
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    # In a long-lived caller (the console) reap the pool when it ends, so no zombie lingers.
    threading.Thread(target=process.wait, name="queuectl-detached-reaper", daemon=True).start()
    return Detached(pid=process.pid, log_path=str(log_path))
