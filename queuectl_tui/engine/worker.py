"""One worker: claim → run → settle (and claim the next job in the same transaction) → …

A worker has its own database connection and runs one job at a time. Every store call that
fails with a locked or broken database is retried with backoff: the claim and the settlement
are single transactions fenced by owner and attempt, so a retry never runs or records a job
twice. A bug while handling one job is logged, the job goes through the failure path, and the
worker ends so that the pool starts a fresh one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ..config import Settings
from ..models import Job, JobState, Outcome, WorkerStatus
from ..store import Settlement, SettleResult, Store, StoreError
from ..timeutil import now_ms, to_iso
from . import events
from .retry import retry_store_call
from .runner import Execution, job_environment
from .wake import ChangeWatcher, WakeBoard

# An idle worker looks for work on its own this often even if nothing woke it: a safety net
# under the watcher, not the way work is normally found.
IDLE_RECHECK = 5.0

T = TypeVar("T")


@dataclass
class Totals:
    """What the pool did, for its closing summary."""

    completed: int = 0
    failed: int = 0  # failed attempts (including timeouts), whether retried or not
    dead: int = 0
    cancelled: int = 0
    discarded: int = 0  # results fenced out because the job was recovered meanwhile
    recovered: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str, count: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + count)


@dataclass
class PoolContext:
    """What the workers of one pool share."""

    settings: Settings
    pid: int
    open_store: Callable[[], Store]
    board: WakeBoard
    watcher: ChangeWatcher | None
    draining: threading.Event = field(default_factory=threading.Event)
    forced: threading.Event = field(default_factory=threading.Event)
    totals: Totals = field(default_factory=Totals)


class WorkerCrash(Exception):
    """Raised to end a worker thread after an unexpected error was handled."""


class WorkerThread(threading.Thread):
    def __init__(self, worker_id: str, ctx: PoolContext) -> None:
        super().__init__(name=f"queuectl-worker-{worker_id}", daemon=True)
        self.worker_id = worker_id
        self.ctx = ctx
        self.current_job: str | None = None
        self.execution: Execution | None = None
        self.crashed = False

    # -- called by the pool from its own thread ------------------------------------------------
    def cancel_current(self) -> None:
        """Forced shutdown: stop the running command's process group."""
        execution = self.execution
        if execution is not None:
            execution.cancel()

    # -- the thread ----------------------------------------------------------------------------
    def run(self) -> None:
        events.event("worker started", worker=self.worker_id)
        store: Store | None = None
        try:
            store = self._retrying("open the database", self.ctx.open_store)
            if store is not None:
                self._loop(store)
        except WorkerCrash:
            self.crashed = True
        except Exception:
            self.crashed = True
            events.event("worker error", level=logging.ERROR, exc_info=True, worker=self.worker_id)
        finally:
            if store is not None:
                self._mark_stopped(store)
                store.close()
            events.event("worker stopped", worker=self.worker_id, crashed=self.crashed or None)

    def _loop(self, store: Store) -> None:
        ctx = self.ctx
        job: Job | None = None
        while True:
            if job is None:
                if ctx.draining.is_set():
                    return
                job = self._retrying(
                    "claim a job", lambda: store.claim(self.worker_id, ctx.pid, now_ms())
                )
                if job is None:
                    on_idle = ctx.watcher.worker_idle if ctx.watcher is not None else None
                    ctx.board.wait(IDLE_RECHECK, on_idle)
                    continue
                # More may be waiting: let one idle peer look too (a burst fans out quickly).
                ctx.board.signal(1)
            job = self._process(store, job)

    def _process(self, store: Store, job: Job) -> Job | None:
        """Run one claimed job and settle it; returns the next job claimed meanwhile."""
        ctx = self.ctx
        self.current_job = job.id
        events.event(
            "claimed",
            job=job.id,
            worker=self.worker_id,
            attempt=job.runs,
            command=job.command,
        )
        if ctx.draining.is_set():
            # Claimed together with the previous settlement just as the pool began to stop:
            # hand it back without spending an attempt.
            reason = "the pool stopped before the job started"
            settlement = Settlement(job, Outcome.CANCELLED, None, "", reason, now_ms())
        else:
            try:
                settlement = self._execute(job)
            except Exception as error:
                self.crashed = True
                events.event(
                    "worker error",
                    level=logging.ERROR,
                    exc_info=True,
                    worker=self.worker_id,
                    job=job.id,
                )
                settlement = Settlement(
                    job,
                    Outcome.FAILED,
                    None,
                    "",
                    f"internal error in the worker: {error!r}",
                    now_ms(),
                )
        claim_next = not (ctx.draining.is_set() or self.crashed)
        result = self._retrying(
            "record a result",
            lambda: store.settle(
                settlement, ctx.settings.backoff_base, ctx.settings.max_backoff, claim_next
            ),
            give_up_when_stopping=False,
        )
        self.current_job = None
        if result is not None:
            self._report(settlement, result)
        if self.crashed:
            raise WorkerCrash
        return result.next_job if result is not None else None

    def _execute(self, job: Job) -> Settlement:
        settings = self.ctx.settings
        execution = Execution(
            job.command,
            timeout=job.timeout or settings.job_timeout,
            output_limit=settings.output_limit,
            kill_grace=settings.kill_grace,
            env=job_environment(job.id, job.runs, self.worker_id),
        )
        # Published before the check: a forced shutdown that starts in between either sees
        # this execution or is seen here.
        self.execution = execution
        try:
            if self.ctx.forced.is_set():
                execution.cancel()
            result = execution.run()
        finally:
            self.execution = None
        return Settlement(
            job, result.outcome, result.exit_code, result.output, result.error, now_ms()
        )

    def _report(self, settlement: Settlement, result: SettleResult) -> None:
        job = settlement.job
        totals = self.ctx.totals
        base = {"job": job.id, "worker": self.worker_id, "attempt": job.runs}
        duration = settlement.finished_at - (job.claimed_at or settlement.finished_at)
        if result.state is None:
            totals.add("discarded")
            events.event(
                "result discarded",
                level=logging.WARNING,
                **base,
                outcome=settlement.outcome.value,
                reason="the job was recovered from this worker meanwhile",
            )
            return
        if settlement.outcome is Outcome.COMPLETED:
            totals.add("completed")
            events.event("completed", **base, exit_code=0, duration_ms=duration)
            return
        if settlement.outcome is Outcome.CANCELLED:
            totals.add("cancelled")
            events.event("cancelled", **base, state=result.state.value, reason=settlement.error)
            return
        totals.add("failed")
        events.event(
            "failed",
            **base,
            outcome=settlement.outcome.value,
            exit_code=settlement.exit_code,
            duration_ms=duration,
            error=settlement.error,
        )
        if result.state is JobState.FAILED and result.run_at is not None:
            if self.ctx.watcher is not None:
                self.ctx.watcher.schedule(result.run_at)
            events.event(
                "retry scheduled",
                job=job.id,
                run_at=to_iso(result.run_at),
                delay_s=round((result.run_at - settlement.finished_at) / 1000, 3),
                attempts=f"{job.attempts}/{job.max_retries + 1}",
            )
        elif result.state is JobState.DEAD:
            totals.add("dead")
            events.event("dead", job=job.id, attempts=job.attempts, error=settlement.error)

    def _retrying(
        self, what: str, call: Callable[[], T], give_up_when_stopping: bool = True
    ) -> T | None:
        """Run a store call until it succeeds. Returns None only if the pool stops meanwhile
        and giving up is allowed (never for settlements, which must not be lost)."""
        give_up = self.ctx.draining.is_set if give_up_when_stopping else None
        return retry_store_call(what, call, give_up, worker=self.worker_id)

    def _mark_stopped(self, store: Store) -> None:
        try:
            store.set_worker_status(self.worker_id, WorkerStatus.STOPPED, None, now_ms())
        except StoreError as error:
            # The pool marks every worker stopped again on its way out.
            events.event(
                "database error", level=logging.WARNING, worker=self.worker_id, error=str(error)
            )
