"""A worker pool: N workers in one process, plus the pool's own duties.

The main thread registers the workers, then loops over the pool's duties: heartbeats (idle or
busy), reaping lost workers and recovering their jobs, watching for `queuectl worker stop`,
replacing the dispatcher if it crashed, and reacting to signals. The dispatcher thread runs
the workers' jobs (see dispatch.py) and hears of new work itself (see wake.py).

Stopping: the first SIGINT/SIGTERM/SIGHUP (or a stop request in the database) stops claiming
and lets running jobs finish; the second kills the running process groups and hands their jobs
back without spending an attempt; a third exits at once (the next pool recovers what was
running). SIGHUP never counts towards the second: a closing terminal sends it more than once.

Liveness means progress: the heartbeat is written only while the dispatcher's loop comes round,
so a pool whose dispatcher hangs looks stale. A pool on this host that is alive but silent for
longer than hung-pool-timeout (stopped with SIGSTOP, or hung) is killed by any other pool,
which then recovers its jobs like those of any lost worker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import sys
import time
from dataclasses import replace
from functools import partial
from typing import Any

from ..config import Settings, SettingsSource, parse_queue_limits
from ..files import open_for_append
from ..location import absolute, shown
from ..models import (
    Job,
    JobState,
    StopKind,
    Worker,
    WorkerStatus,
    local_operator,
)
from ..store import Store, StoreError, StoreOptions, open_store
from ..timeutil import human_seconds, now_ms, to_iso
from . import events
from .containment import pool_orphans, prepare_pool_process, reap_orphans
from .detach import PoolOptions, log_path_for
from .dispatch import Dispatcher, PoolContext
from .identity import pid_namespace, pool_id, same_pid_namespace
from .live_settings import LiveSettings
from .liveness import pid_reused, process_started_ms
from .procfs import pid_alive
from .retention import Retention
from .retry import retry_store_call
from .runner import stop_lost_run
from .ticker import ScheduleTicker
from .wake import Doorbell

REAP_INTERVAL = 1.0  # seconds between checks for lost workers
STOP_CHECK_INTERVAL = 0.5  # seconds between checks for a `worker stop` request
# The dispatcher gives up on a locked database after this long and tries again later, so that
# a long write elsewhere (a huge bulk enqueue) never stalls the supervision of running jobs.
DISPATCH_LOCK_WAIT = 0.05
# How long the start line waits for the dispatcher to open its store, to tell how it wakes.
OPEN_WAIT = 5.0
WAKE_MODE_ENV = "QUEUECTL_WAKE"  # how idle workers learn of new work (see wake.py)
WAKE_MODES = ("auto", "inotify", "poll")

EXIT_OK = 0
EXIT_FAILED = 1  # the pool had to give up: its database vanished, or its dispatcher hung
EXIT_FORCED = 130
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP: the terminal closed
# A dispatcher silent this many heartbeat intervals (at least MIN_SILENT s) is not making
# progress: the pool stops beating for its workers.
SILENT_HEARTBEATS = 3
MIN_SILENT = 1.0
# Why a pool gave up (exit code 1).
ABANDONED = "the dispatcher hung"
DATABASE_GONE = "the database file was deleted or replaced"
# After killing a hung pool, how long to wait for it to be gone before recovering its jobs.
HUNG_KILL_WAIT = 2.0


class Pool:
    def __init__(
        self,
        settings: Settings,
        options: PoolOptions,
        wake_mode: str = "auto",
        launched_at: int | None = None,
        source: SettingsSource | None = None,
    ) -> None:
        # The settings it started with; the live ones follow the config file `source` names.
        self.settings = settings
        self.live = LiveSettings(settings, source)
        self.options = options
        self.wake_mode = wake_mode
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.pid_namespace = pid_namespace()
        self.pool_id = pool_id()
        self.started_at = 0  # this host's clock: for the uptime in the closing line
        # A stop request counts if it came after our registration (the store says which) or
        # after `launched_at`: for `worker start`, when its process started, so that a
        # `worker stop` run while the pool was still loading stops it too. This host's clock
        # until _run moves it onto the store's.
        self.launched_at = launched_at or now_ms()
        self._stop_baseline: int | None = None
        self._beating_since: int | None = None  # our heartbeats have succeeded steadily since
        self._last_beat: int | None = None
        self._database_identity: tuple[int, int] | None = None
        self._failure: str | None = None  # why the pool gave up, if it did
        self.dispatcher: Dispatcher | None = None
        self._next_index = 1
        self._signals = 0  # stop requests so far, hang-ups left out: the second one forces
        self._hung_up = False
        self._stop_reason: str | None = None
        self._terminal_fds: list[int] = []  # stdout and stderr, if a terminal (see run)
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

    def hang_up(self) -> None:
        """The terminal closed: stop gracefully, however often this comes. The kernel hangs
        up the foreground process group and a dying shell passes its SIGHUP on, so one
        closed window is several signals; none of them may cancel the running jobs."""
        self._hung_up = True
        if self._stop_reason is None:
            self._stop_reason = "SIGHUP"
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"!")

    def _stopping(self) -> bool:
        return self._signals > 0 or self._hung_up

    def _on_signal(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGHUP:
            self.hang_up()
            return
        if self._signals >= 2:
            # Third signal: leave now, taking the running commands down with us. Their jobs
            # stay `processing` under workers whose process is gone; the next pool on this
            # host recovers them at once (the interrupted attempt counts).
            dispatcher = self.dispatcher
            for pid in dispatcher.running_pids() if dispatcher is not None else []:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):  # stderr may be a closed terminal or pipe
                os.write(2, b"queuectl: exiting immediately\n")
            os._exit(EXIT_FORCED)
        self.request_stop(signal.Signals(signum).name)

    # -- the pool ------------------------------------------------------------------------------
    def run(self, install_signals: bool = True) -> int:
        settings = self.settings
        # Fails early, before any thread starts; creates the database with the file mode.
        store = open_store(settings.database, StoreOptions(file_mode=settings.file_permissions))
        previous: dict[signal.Signals, Any] = {}
        try:
            if install_signals:
                # The process is the pool's: after a hang-up its terminal output moves.
                self._terminal_fds = [fd for fd in (1, 2) if os.isatty(fd)]
                for signum in STOP_SIGNALS:
                    if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
                        continue  # `nohup queuectl worker start`: asked to outlive its terminal
                    previous[signum] = signal.signal(signum, self._on_signal)
            return self._run(store)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            store.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _run(self, store: Store) -> int:
        settings = self.settings
        self.started_at = now_ms()
        self.launched_at += store.now() - now_ms()  # stop requests carry the store's clock
        doorbell = Doorbell()
        path = settings.database
        queues = self.options.queues
        # Every store of the pool creates what it creates (the lock file, say) with the mode.
        options = StoreOptions(file_mode=settings.file_permissions)
        dispatching = replace(options, lock_wait=DISPATCH_LOCK_WAIT, planned_once=True)
        self.ctx = ctx = PoolContext(
            live=self.live,
            pid=self.pid,
            queues=queues,
            open_store=lambda: open_store(path, dispatching),
            doorbell=doorbell,
            wake_mode=self.wake_mode,
        )
        self._database_identity = _file_identity(path)
        # Predecessors first: a dead pool that had our pid used our worker ids.
        self._reap(store, startup=True)
        self._apply_queue_limits(store)
        dispatcher = self._start_dispatcher(store)
        retention = Retention(lambda: open_store(path, options), settings)
        if retention.needed:
            retention.start()
            events.event("retention", removes_after_days=retention.describe())
        # Every pool fires schedules: one job per tick however many pools run (ticker.py).
        ticker = ScheduleTicker(lambda: open_store(path, options), settings)
        ticker.start()
        events.event(
            "pool started",
            pool=self.pool_id,
            workers=self.options.count,
            queues=",".join(queues) if queues else "all",
            database=shown(absolute(path)),
            wake=self._wake_mode(dispatcher),
        )
        now = time.monotonic()
        next_beat = now + settings.heartbeat_interval
        next_reap = now + REAP_INTERVAL
        next_stop_check = now
        graceful_started = left_terminal = False
        try:
            while True:
                if self._hung_up and not left_terminal:
                    left_terminal = True
                    self._leave_the_terminal()
                if self._stopping() and not graceful_started:
                    graceful_started = True
                    self._begin_stop(store, self._stop_reason or "requested")
                if (self._signals >= 2 or self._failure) and not ctx.forced.is_set():
                    self._force(self._stop_reason or "requested")
                if ctx.draining.is_set() and not dispatcher.is_alive():
                    break
                if ctx.draining.is_set() and self._dispatcher_hung(dispatcher):
                    self._abandon(store, dispatcher)
                    break
                now = time.monotonic()
                if not ctx.draining.is_set() and not dispatcher.is_alive():
                    dispatcher = self._replace_crashed(store, dispatcher)
                if now >= next_beat:
                    next_beat = now + settings.heartbeat_interval
                    self._heartbeat(store)
                    self.live.refresh()  # so that an idle pool, too, logs a change soon
                if now >= next_reap:
                    next_reap = now + REAP_INTERVAL
                    self._reap(store)
                    self._check_database_file(path)
                    # An orphan that ended after its run's last look would stay a zombie.
                    reap_orphans(pool_orphans())
                if now >= next_stop_check:
                    next_stop_check = now + STOP_CHECK_INTERVAL
                    if not ctx.forced.is_set():
                        self._check_stop_request(store)
                wait = min(next_beat, next_reap, next_stop_check) - time.monotonic()
                if ctx.draining.is_set():
                    wait = min(wait, 0.05)  # watch the dispatcher finish
                self._sleep(max(0.0, wait))
        finally:
            ctx.draining.set()
            doorbell.ring()
            retention.stop()
            ticker.stop()
            abandoned = self._failure == ABANDONED
            dispatcher.join(timeout=0 if abandoned else 5)
            ticker.join(timeout=2)  # a round in flight commits or rolls back whole
            if not abandoned:  # an abandoned pool's workers are marked lost already
                self._mark_all_stopped(store)
            if not dispatcher.is_alive():
                doorbell.close()
        return self._finish()

    @staticmethod
    def _wake_mode(dispatcher: Dispatcher) -> str | None:
        """How idle workers hear of new work, once the dispatcher has opened its store (None
        if it has not yet: a database locked at the start)."""
        return dispatcher.wake_mode if dispatcher.opened.wait(OPEN_WAIT) else None

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
        now = store.now()
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
                    pid_namespace=self.pid_namespace,
                )
            )
            self._next_index += 1
        baseline = retry_store_call("register the workers", lambda: store.register_workers(rows))
        self.dispatcher = Dispatcher([row.id for row in rows], self.ctx)
        if self._stop_baseline is None:
            # Registered first, then the stop state read: a `worker stop` that counted us
            # recorded its request after our registration, so it is later than the baseline.
            self._stop_baseline = baseline
            self._check_stop_request(store)
            if self._stopping():
                self.ctx.draining.set()  # stopped before it began: claim nothing
        self.dispatcher.start()
        return self.dispatcher

    def _replace_crashed(self, store: Store, crashed: Dispatcher) -> Dispatcher:
        """The dispatcher died of a bug: its workers are stopped, and what it could not record
        is recovered (the failure path) before fresh workers take over."""
        if crashed.corrupt is not None:
            raise crashed.corrupt  # a damaged database: stop rather than start over and over
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

    def _dispatcher_silent_after(self) -> float:
        return max(SILENT_HEARTBEATS * self.settings.heartbeat_interval, MIN_SILENT)

    def _dispatcher_hung(self, dispatcher: Dispatcher) -> bool:
        """Silent for longer than a live pool's workers may be: the bound after which a
        stopping pool gives up on its dispatcher."""
        bound = self.settings.stale_worker_timeout
        return dispatcher.is_alive() and dispatcher.silent_for() > bound

    def _heartbeat(self, store: Store) -> None:
        ids = self._active_ids()
        if not ids:
            return
        dispatcher = self.dispatcher
        if dispatcher is not None and dispatcher.silent_for() > self._dispatcher_silent_after():
            # No progress, no heartbeat: stuck workers must look stale to everyone.
            if self._beating_since is not None:
                events.event(
                    "dispatcher not responding, heartbeats paused",
                    level=logging.WARNING,
                    silent=human_seconds(dispatcher.silent_for()),
                )
            self._beating_since = self._last_beat = None
            return
        try:
            started = store.now()
            store.heartbeat(ids, started)
            mine = set(ids)
            lost = [
                w
                for w in store.list_workers(active_only=False)
                if w.id in mine and w.status is WorkerStatus.LOST
            ]
            ended = store.now()
        except StoreError as error:
            events.event("heartbeat failed", level=logging.WARNING, error=str(error))
            self._beating_since = self._last_beat = None
            return
        self._beat_recorded(started, ended)
        if lost:
            # Another pool missed our heartbeats (a stalled host, a long lock) and took our
            # jobs back; carry on under the same ids, marked alive again.
            now = store.now()
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
                retry_store_call("re-register a worker", partial(store.register_workers, [revived]))

    def _beat_recorded(self, started: int, ended: int) -> None:
        """Track how long our own heartbeats have gone through on time. A slow write, a
        failure, or a gap (this process stopped, the machine asleep) starts the count again:
        then other pools may have been held back as well."""
        interval_ms = self.settings.heartbeat_interval * 1000
        late = self._last_beat is None or started - self._last_beat > 2 * interval_ms + 1000
        if late or ended - started > interval_ms + 1000:
            self._beating_since = ended
        self._last_beat = ended

    def _may_judge_others(self, now: int) -> bool:
        """True if our heartbeats have gone through steadily for a stale timeout: whatever
        held the database or the machine back held us back too, so a pool silent meanwhile
        was not held back by it."""
        if self._beating_since is None or self._last_beat is None:
            return False
        interval_ms = self.settings.heartbeat_interval * 1000
        steady_ms = self.settings.stale_worker_timeout * 1000
        return now - self._last_beat <= 2 * interval_ms + 1000 and (
            self._last_beat - self._beating_since >= steady_ms
        )

    # -- recovery ----------------------------------------------------------------------------
    def _reap(self, store: Store, startup: bool = False) -> None:
        """Mark lost the workers that are gone (same-host dead PIDs at once, any host after
        stale_worker_timeout without a heartbeat) and recover their jobs."""
        mine = set(self.dispatcher.worker_ids if self.dispatcher is not None else [])
        try:
            now = store.now()
            active = store.list_workers(active_only=True)
        except StoreError as error:
            events.event("reaper failed", level=logging.WARNING, error=str(error))
            return
        dead: list[str] = []
        killed: set[int] = set()
        for worker in active:
            if worker.id in mine:
                continue
            if same_pid_namespace(worker.pid_namespace):
                # Here the process table is the truth: a live pool whose heartbeat lags behind
                # a long write (a huge bulk enqueue holds the lock) is not lost, unless it has
                # been silent for so long that it must be frozen or hung. Only in our own PID
                # namespace: elsewhere its pid names some other process, or none.
                if worker.pid != self.pid and pid_alive(worker.pid):
                    if pid_reused(worker, now):
                        reason = f"process {worker.pid} is a new process (the pid was reused)"
                    elif self._is_hung(worker, now):
                        silent = human_seconds((now - worker.last_heartbeat) / 1000)
                        if worker.pid not in killed:
                            killed.add(worker.pid)
                            self._kill_hung_pool(worker, silent)
                        reason = f"pool process {worker.pid} hung (no heartbeat for {silent})"
                    else:
                        continue
                else:
                    reason = f"process {worker.pid} is gone"
            elif worker.is_stale(now, self.settings.stale_worker_timeout):
                # A pool of another host (or PID namespace) is judged by its heartbeats alone:
                # only by a pool whose own went through steadily meanwhile, so that what held
                # the database back (an outage, a lock) is not taken for the other's death.
                if not self._may_judge_others(now):
                    continue
                silent = human_seconds((now - worker.last_heartbeat) / 1000)
                reason = f"no heartbeat for {silent}"
            else:
                continue
            dead.append(worker.id)
            events.event("worker lost", level=logging.WARNING, worker=worker.id, reason=reason)
        if dead or startup:
            self._recover(store, dead)

    def _is_hung(self, worker: Worker, now: int) -> bool:
        return worker.is_stale(now, self.settings.hung_after_s) and self._may_judge_others(now)

    @staticmethod
    def _kill_hung_pool(worker: Worker, silent: str) -> None:
        """SIGKILL a pool that is alive but silent (a SIGSTOP does not shield it). Its runs
        live in their own sessions; recovering its jobs stops them (stop_lost_run)."""
        events.event(
            "pool hung, killing it",
            level=logging.WARNING,
            pool=worker.pool_id,
            pid=worker.pid,
            silent=silent,
        )
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(worker.pid, signal.SIGKILL)
        give_up_at = time.monotonic() + HUNG_KILL_WAIT
        while pid_alive(worker.pid) and time.monotonic() < give_up_at:
            time.sleep(0.01)

    def _recover(self, store: Store, dead: list[str]) -> None:
        settings = self.live.refresh()  # the live retry budget applies to a lost run
        try:
            jobs = store.recover_orphans(dead, settings.retry_policy, store.now())
        except StoreError as error:
            events.event("recovery failed, will retry", level=logging.WARNING, error=str(error))
            return
        for job in jobs:
            if self.ctx is not None:
                self.ctx.totals.add("recovered")
            fields: dict[str, Any] = {"job": job.id, "state": job.state.value}
            # The lost run may still be running here, orphaned: stop it before the job runs
            # again, so two runs of one job never overlap on this host.
            lost_by = self._lost_worker(store, job)
            if lost_by is not None:
                fields["stopped_processes"] = stop_lost_run(job.id, job.runs, lost_by) or None
            if job.state is JobState.FAILED:
                fields["run_at"] = to_iso(job.run_at)
                if self.ctx is not None:
                    self.ctx.doorbell.ring()  # an idle dispatcher learns the new run_at
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
        """Obey `worker stop` (for every pool or this one): a graceful request as a first
        signal, a forced one as a second, also while a graceful stop is under way."""
        if self._stop_baseline is None:
            return  # not registered yet: a request now is caught right after registering
        try:
            asked = {
                store.stop_requested_after(self._stop_baseline, self.pool_id),
                store.stop_requested_since(self.launched_at, self.pool_id),
            }
        except StoreError:
            return
        if StopKind.FORCED in asked:
            while self._signals < 2:
                self.request_stop("queuectl worker stop --force")
        elif StopKind.GRACEFUL in asked and not self._stopping():
            self.request_stop("queuectl worker stop")

    def _check_database_file(self, path: str) -> None:
        """A database file deleted or replaced under the pool: the queue it serves is gone,
        so stop (and cancel what runs) rather than work on for nobody."""
        if self._failure is not None or self._database_identity is None:
            return
        identity = _file_identity(path)
        if identity == self._database_identity:
            return
        self._failure = DATABASE_GONE
        events.event(
            "the database file was deleted or replaced, so the pool stops",
            level=logging.ERROR,
            database=shown(absolute(path)),
        )
        self.request_stop(DATABASE_GONE)  # and, with _failure set, cancels what runs

    def _abandon(self, store: Store, dispatcher: Dispatcher) -> None:
        """The pool is stopping but its dispatcher stopped coming round: kill its commands,
        hand its jobs to the failure path as lost, and leave without it."""
        self._failure = ABANDONED
        running = dispatcher.running_pids()
        events.event(
            "dispatcher not responding, abandoning its jobs",
            level=logging.ERROR,
            silent=human_seconds(dispatcher.silent_for()),
            running_jobs=len(running),
        )
        for pid in running:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        self._recover(store, dispatcher.worker_ids)

    def _apply_queue_limits(self, store: Store) -> None:
        """Set the limits the queue-limits setting names, where the store holds others (every
        pool then obeys them; the audit trail says the config set them)."""
        wanted = parse_queue_limits(self.settings.queue_limits)
        if not wanted:
            return
        now = store.now()
        who = local_operator("config")
        held = {queue.name: queue.max_running for queue in store.queues(now)}
        for name, limit in wanted.items():
            if held.get(name) != limit:
                action = who.action("limit", f"{name} max_running={limit}")
                store.set_queue_limit(name, limit, now, action)
                events.event("queue limit set", queue=name, max_running=limit, by="queue-limits")

    def _begin_stop(self, store: Store, reason: str) -> None:
        assert self.ctx is not None
        self.ctx.draining.set()
        self.ctx.doorbell.ring()
        jobs = self.dispatcher.current_jobs() if self.dispatcher is not None else {}
        busy = [(worker_id, job_id) for worker_id, job_id in jobs.items() if job_id]
        # The workers are marked first, so whoever reads the log line finds them stopping.
        now = store.now()
        for worker_id, job_id in busy:
            with contextlib.suppress(StoreError):
                store.set_worker_status(worker_id, WorkerStatus.STOPPING, job_id, now)
        again = "SIGINT or SIGTERM twice" if self._hung_up else "the signal again"
        events.event(
            "pool stopping",
            reason=reason,
            running_jobs=len(busy),
            hint=f"send {again} to cancel running jobs" if busy else None,
        )

    def _leave_the_terminal(self) -> None:
        """After a hang-up every write to the terminal fails (EIO): the pool's output goes on
        in the workers log file, as a detached pool's does, so that how its jobs ended is
        still told somewhere (to /dev/null if that file cannot be opened)."""
        if not self._terminal_fds:
            return
        path = log_path_for(self.settings.database)
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # as detach.py
            with open_for_append(path, self.settings.file_permissions) as log:
                _point_at(log.fileno(), self._terminal_fds)
        except OSError:
            with open(os.devnull, "wb") as nowhere:
                _point_at(nowhere.fileno(), self._terminal_fds)
        moved = 2 in self._terminal_fds  # the log is on stderr
        events.event("terminal hung up", pool=self.pool_id, log=str(path) if moved else None)

    def _force(self, reason: str) -> None:
        assert self.ctx is not None
        self.ctx.forced.set()
        self.ctx.doorbell.ring()
        running = self.dispatcher.running_pids() if self.dispatcher is not None else []
        events.event("pool cancelling running jobs", reason=reason, running_jobs=len(running))

    def _mark_all_stopped(self, store: Store) -> None:
        now = store.now()
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
            interrupted=totals.interrupted,
            recovered=totals.recovered,
            uptime=human_seconds((now_ms() - self.started_at) / 1000),
        )
        if self._failure is not None:
            return EXIT_FAILED
        return EXIT_FORCED if forced else EXIT_OK


def _file_identity(path: str) -> tuple[int, int] | None:
    """The file's device and inode, or None if it does not exist (or has no name left)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return None if info.st_nlink == 0 else (info.st_dev, info.st_ino)


def _point_at(target: int, fds: list[int]) -> None:
    for fd in fds:
        os.dup2(target, fd)


def _silence_broken_streams() -> None:
    """A closed terminal or pipe on stdout/stderr must not turn the exit into an error: what
    is still buffered goes to /dev/null instead."""
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        try:
            stream.flush()
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, fd)
                os.close(devnull)


def run_pool(settings: Settings, options: PoolOptions, source: SettingsSource | None = None) -> int:
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
    try:
        pool = Pool(settings, options, wake_mode, process_started_ms(), source)
        return pool.run(install_signals=True)
    finally:
        _silence_broken_streams()
