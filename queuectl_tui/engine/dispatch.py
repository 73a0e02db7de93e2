"""The pool's dispatcher: one thread that keeps every worker busy.

Each worker of a pool is a slot of the dispatcher: a worker id (its row in the database) and
at most one running command. The dispatcher runs every command through one Supervisor (a
single poll loop) and talks to the store in exchanges: the runs that ended since the last
exchange are settled, and every free worker is given its next job, in one transaction. Under
load several runs end per turn of the loop, so one commit carries several jobs; a lone job
still starts and settles at once.

A store call that fails (a database locked for longer than the store's own retries, a full
disk) is retried with backoff without stopping the loop: running commands keep their
deadlines, and their results wait in memory until a later exchange records them. The claim
and the settlement are fenced transactions, so a retry never runs or records a job twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from ..config import Settings
from ..models import Job, JobState, Outcome, WorkerStatus
from ..store import (
    ChangeFeed,
    ClaimRequest,
    Exchange,
    OutputAppend,
    Settlement,
    SettleResult,
    Store,
    StoreCorrupt,
    StoreError,
    StoreWaitingError,
)
from ..timeutil import now_ms, to_iso
from . import events
from .live_settings import LiveSettings
from .retry import retry_store_call
from .runner import Run, Supervisor, job_environment
from .wake import Doorbell, WorkAlarm

# An idle dispatcher looks for work on its own this often even if nothing woke it: a safety
# net under the change feed, not the way work is normally found.
IDLE_RECHECK = 5.0
# After a failed exchange (a locked or broken database) the next try comes this much later,
# doubling up to the maximum; supervision goes on meanwhile.
RETRY_FIRST = 0.05
RETRY_MAX = 0.5
# After a crash, how long the dispatcher keeps trying to record what it knows.
RECORD_AT_EXIT = 30.0
# While commands run, operators' cancel requests for them are looked for this often: a
# cancelled command is stopped within a second.
CANCEL_CHECK = 0.25
# A run's output goes to the store (live output) once it has run this long, then at most this
# often: a follower is under a second behind, and a short job writes nothing until its result.
LIVE_AFTER = 0.3
LIVE_EVERY = 0.3


@dataclass
class Totals:
    """What the pool did, for its closing summary."""

    completed: int = 0
    failed: int = 0  # failed attempts (including timeouts), whether retried or not
    dead: int = 0
    cancelled: int = 0  # by an operator
    interrupted: int = 0  # by a forced shutdown, handed back without spending an attempt
    discarded: int = 0  # results fenced out because the job was recovered meanwhile
    recovered: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str, count: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + count)


@dataclass
class PoolContext:
    """What the pool and its dispatcher share."""

    live: LiveSettings
    pid: int
    open_store: Callable[[], Store]
    doorbell: Doorbell  # rung by the pool's other threads (wake.py)
    wake_mode: str = "auto"  # how the change feed hears commits (Store.change_feed)
    queues: tuple[str, ...] | None = None  # the queues the pool serves (None: every queue)
    draining: threading.Event = field(default_factory=threading.Event)
    forced: threading.Event = field(default_factory=threading.Event)
    totals: Totals = field(default_factory=Totals)

    @property
    def settings(self) -> Settings:
        """The settings in use, as of the last look at the config file."""
        return self.live.current


@dataclass(slots=True)
class Slot:
    """One worker: its id and the job it runs now, if any."""

    worker_id: str
    job: Job | None = None
    run: Run | None = None
    freed: int = 0  # when it last became free (a turn count): the longest idle works first


_BY_FREED = attrgetter("freed")


class Dispatcher(threading.Thread):
    def __init__(self, worker_ids: list[str], ctx: PoolContext) -> None:
        super().__init__(name="queuectl-dispatcher", daemon=True)
        self.ctx = ctx
        self.slots = [Slot(worker_id) for worker_id in worker_ids]
        self.crashed = False
        self.corrupt: StoreCorrupt | None = None  # the database is damaged: the pool stops
        # Set once the store and its change feed are open (or could not be): `wake_mode` then
        # says how idle workers hear of new work ("none": only by looking now and then).
        self.opened = threading.Event()
        self.wake_mode = "none"
        self._by_run: dict[int, Slot] = {}
        self._unrecorded: list[tuple[Slot, Settlement]] = []  # waiting for an exchange
        # The last live output of runs that ended: written before their results.
        self._live_ends: list[OutputAppend] = []
        self._live_at = 0.0  # when live output is next written
        self._look_for_work = True
        self._recheck_at = 0.0  # when idle: look for work then even if nothing rang
        self._retry_at = 0.0
        self._retry_delay = RETRY_FIRST
        self._in_line = False  # waiting for the write turn behind another process's write
        self._cancelled = False
        self._cancel_check_at = 0.0
        self._turns = 0
        # When the loop last came round (monotonic): the pool's heartbeat follows it, so a
        # dispatcher that hangs looks stale. The loop wakes at least every `_turn_at_least`.
        self.last_turn = time.monotonic()
        self._turn_at_least = min(IDLE_RECHECK, ctx.settings.heartbeat_interval)
        # What results are stamped with: the clock of the dispatcher's store, once it is open.
        self._now: Callable[[], int] = now_ms

    # -- read by the pool from its own thread (snapshots; the GIL keeps each read whole) -----
    @property
    def worker_ids(self) -> list[str]:
        return [slot.worker_id for slot in self.slots]

    def current_jobs(self) -> dict[str, str | None]:
        return {slot.worker_id: slot.job.id if slot.job else None for slot in list(self.slots)}

    def running_pids(self) -> list[int]:
        runs = [slot.run for slot in list(self.slots)]
        return [run.pid for run in runs if run is not None and run.pid is not None]

    def silent_for(self) -> float:
        """Seconds since the loop last came round (it does at least every heartbeat)."""
        return time.monotonic() - self.last_turn

    # -- the thread ----------------------------------------------------------------------------
    def run(self) -> None:
        for worker_id in self.worker_ids:
            events.event("worker started", worker=worker_id)
        store: Store | None = None
        feed: ChangeFeed | None = None
        supervisor: Supervisor | None = None
        crash: Exception | None = None
        try:
            store = retry_store_call(
                "open the database", self.ctx.open_store, self.ctx.draining.is_set
            )
            if store is not None:
                self._now = store.now
                feed = self._open_feed(store)
                self.opened.set()
                supervisor = Supervisor()
                supervisor.watch(self.ctx.doorbell.fileno())
                alarm = WorkAlarm(self.ctx.doorbell, feed, store.now, supervisor)
                self._loop(store, supervisor, alarm)
        except StoreCorrupt as error:
            self.crashed, self.corrupt, crash = True, error, error
            events.event("dispatcher stopped", level=logging.ERROR, error=str(error))
        except Exception as error:
            self.crashed = True
            crash = error
            events.event("dispatcher error", level=logging.ERROR, exc_info=True)
        finally:
            self.opened.set()
            if supervisor is not None:
                supervisor.close()  # after a crash: kills what still runs
            if feed is not None:
                feed.close()
            if store is not None:
                if self.corrupt is None:  # nothing more can be written to a damaged file
                    self._record_on_the_way_out(store, crash)
                    self._mark_stopped(store)
                store.close()
            for worker_id in self.worker_ids:
                events.event("worker stopped", worker=worker_id, crashed=self.crashed or None)

    def _open_feed(self, store: Store) -> ChangeFeed | None:
        """The store's feed of commits that may give a worker work, on the dispatcher's own
        connection: its own claims and results are not news to it."""
        try:
            feed = store.change_feed(self.ctx.wake_mode, work_only=True)
        except StoreError as error:
            # Workers still find work on their own every IDLE_RECHECK seconds.
            events.event("change feed unavailable", level=logging.WARNING, error=str(error))
            return None
        self.wake_mode = feed.mode
        return feed

    def _loop(self, store: Store, supervisor: Supervisor, alarm: WorkAlarm) -> None:
        ctx = self.ctx
        while True:
            self._turns += 1
            draining = ctx.draining.is_set()
            if ctx.forced.is_set() and not self._cancelled:
                self._cancelled = True
                supervisor.cancel_all()
            now = self.last_turn = time.monotonic()
            if not self._look_for_work and now >= self._recheck_at:
                self._look_for_work = True  # the idle safety net
            free = sorted((slot for slot in self.slots if slot.job is None), key=_BY_FREED)
            claiming = bool(free) and self._look_for_work and not draining
            if (self._unrecorded or claiming) and now >= self._retry_at:
                with events.held_lines():  # one write for the turn's log lines
                    self._exchange(store, supervisor, alarm, free if claiming else [])
            if draining and not supervisor.runs and not self._unrecorded:
                return
            now = time.monotonic()
            if supervisor.runs and now >= self._cancel_check_at:
                self._cancel_check_at = now + CANCEL_CHECK
                self._stop_cancelled(store, now)
            timeout = IDLE_RECHECK if self._look_for_work else max(0.0, self._recheck_at - now)
            timeout = min(timeout, self._turn_at_least)  # come round even when idle: alive
            if supervisor.runs:
                timeout = min(timeout, max(0.0, self._cancel_check_at - now))
            if self._retry_at > now:  # the database failed: try again then
                timeout = min(timeout, self._retry_at - now)
            live_due = self._live_due()
            if live_due is not None:
                timeout = min(timeout, max(0.0, live_due - now))
            timeout = min(timeout, alarm.wait_at_most(now))
            if self._in_line:  # supervise, then go on waiting for the turn
                timeout = 0.0
            finished, rung = supervisor.step(timeout)
            if alarm.rang(rung):
                self._look_for_work = True
            for run in finished:
                self._finished(run)
            if finished and not alarm.listening:
                # A worker is free: it looks for work. (If others found none, and nothing rang
                # since, there is none: the exchange only records the result.)
                self._look_for_work = True
            if live_due is not None and time.monotonic() >= live_due:
                self._write_live(store)

    def _live_due(self) -> float | None:
        """When live output is next due to be written (None: no run has new output)."""
        due: float | None = None
        for slot in self.slots:
            run = slot.run
            if run is not None and run.live.pending:
                moment = max(self._live_at, run.started_at + LIVE_AFTER)
                due = moment if due is None else min(due, moment)
        return due

    def _write_live(self, store: Store) -> None:
        """Write the new output of runs that have run long enough. Best effort: what fails
        to be written is still in the run's result."""
        now = time.monotonic()
        self._live_at = now + LIVE_EVERY
        appends = []
        for slot in self.slots:
            run, job = slot.run, slot.job
            if run is None or job is None or now < run.started_at + LIVE_AFTER:
                continue
            taken = run.live.take(self._now())
            if taken is not None:
                appends.append(
                    OutputAppend(job.id, job.runs, slot.worker_id, taken.chunks, taken.keep_from)
                )
        try:
            store.append_output(appends)
        except StoreError as error:
            events.event("live output not written", level=logging.DEBUG, error=str(error))

    def _stop_cancelled(self, store: Store, now: float) -> None:
        """Stop the commands of runs an operator asked to cancel (their jobs then end
        cancelled: see lifecycle.after_attempt)."""
        running = {slot.job.id: slot for slot in self.slots if slot.job and slot.run}
        try:
            requested = store.cancel_requested(list(running))
        except StoreError:
            return  # looked for again at the next check
        for job_id in requested:
            slot = running[job_id]
            if slot.run is not None and slot.run.cancel(now, by_operator=True):
                events.event("cancel requested", job=job_id, worker=slot.worker_id)

    def _finished(self, run: Run) -> None:
        slot = self._by_run.pop(id(run))
        result = run.result
        assert result is not None
        job = slot.job
        if run.live.sent_any and job is not None:  # followed live: its last piece too
            taken = run.live.take(self._now(), final=True)
            if taken is not None:
                self._live_ends.append(
                    OutputAppend(job.id, job.runs, slot.worker_id, taken.chunks, taken.keep_from)
                )
        self._hand_in(slot, result.outcome, result.error, result.exit_code, result.output)
        slot.freed = self._turns

    def _hand_in(
        self,
        slot: Slot,
        outcome: Outcome,
        error: str | None,
        exit_code: int | None = None,
        output: str = "",
    ) -> None:
        """The slot's job is over, run or not: its result waits for the next exchange."""
        job = slot.job
        assert job is not None
        settlement = Settlement(job, outcome, exit_code, output, error, self._now())
        slot.run = slot.job = None
        self._unrecorded.append((slot, settlement))

    def _send(self, store: Store, claimants: list[Slot]) -> tuple[Exchange, int]:
        """Record every waiting result and claim for `claimants`, in one transaction; then
        report the results. Returns what it did and the time it claimed at (the store's,
        ms). On a StoreError the results keep waiting."""
        # A look at the config file per exchange: the claims and failures of this one follow
        # a `config set` that came before it.
        settings = self.ctx.live.refresh()
        if self._live_ends:
            # Before the results: a reader that sees a run ended has seen all of its output.
            store.append_output(self._live_ends)
            self._live_ends = []
        now = store.now()
        exchange = store.exchange(
            ClaimRequest(
                [settlement for _, settlement in self._unrecorded],
                [slot.worker_id for slot in claimants],
                self.ctx.pid,
                now,
                settings.retry_policy,
                self.ctx.queues,
            )
        )
        recorded, self._unrecorded = self._unrecorded, []
        for (slot, settlement), result in zip(recorded, exchange.settled, strict=True):
            self._report(slot.worker_id, settlement, result)
        return exchange, now

    def _exchange(
        self, store: Store, supervisor: Supervisor, alarm: WorkAlarm, free: list[Slot]
    ) -> None:
        self._in_line = False
        sent = time.monotonic()
        try:
            exchange, asked_at = self._send(store, free)
            if exchange.claimed and time.monotonic() - sent > self._late_after():
                exchange = self._still_ours(store, exchange)
        except StoreWaitingError:
            # Another process is writing (a bulk enqueue may take a second): nothing failed,
            # and the store keeps this pool's place in line while the loop supervises.
            self._in_line = True
            return
        except StoreError as error:
            events.event(
                "database error, retrying",
                level=logging.WARNING,
                action="record results and claim jobs",
                retry_in_s=round(self._retry_delay, 2),
                error=str(error),
            )
            self._retry_at = time.monotonic() + self._retry_delay
            self._retry_delay = min(self._retry_delay * 2, RETRY_MAX)
            return
        self._retry_at = 0.0
        self._retry_delay = RETRY_FIRST
        self._start_claimed(supervisor, free, exchange)
        if free:
            # Work for every free worker: the exchange that settles them finds the next
            # jobs. Else a free worker sleeps until something rings, or the next job's run_at.
            idle = len(exchange.claimed) < len(free)
            alarm.listen(idle)
            if idle:
                self._look_for_work = False
                self._recheck_at = time.monotonic() + IDLE_RECHECK
        elif alarm.listening and exchange.made_work:
            # Results recorded without a claim may have made work (a dependent freed, room
            # under a queue's limit): look now. The feed may not tell of the dispatcher's
            # own commits.
            self._look_for_work = True
        alarm.exchanged(store, exchange.made_work, asked_at)

    def _late_after(self) -> float:
        """An answer slower than this may come after another pool declared our workers lost
        (our heartbeats were held up as well: a partition) and recovered what it claimed."""
        return self.ctx.settings.stale_worker_timeout / 2

    def _still_ours(self, store: Store, exchange: Exchange) -> Exchange:
        """The claims of a late answer that are still ours (processing, under the worker
        and run claimed): a job recovered meanwhile is another pool's now, never started
        here."""
        kept: dict[str, Job] = {}
        for worker_id, job in exchange.claimed.items():
            try:
                now = store.get(job.id)
            except StoreError:
                now = job  # cannot tell: started, as any claim is (its result is fenced)
            if (
                now is not None
                and now.state is JobState.PROCESSING
                and (now.worker_id, now.runs) == (worker_id, job.runs)
            ):
                kept[worker_id] = job
                continue
            events.event(
                "claim recovered meanwhile, not started",
                level=logging.WARNING,
                job=job.id,
                worker=worker_id,
                attempt=job.runs,
            )
        return replace(exchange, claimed=kept)

    def _start_claimed(self, supervisor: Supervisor, free: list[Slot], exchange: Exchange) -> None:
        ctx = self.ctx
        for slot in free:
            job = exchange.claimed.get(slot.worker_id)
            if job is None:
                continue
            slot.job = job
            events.event(
                "claimed", job=job.id, worker=slot.worker_id, attempt=job.runs, command=job.command
            )
            if ctx.draining.is_set():
                # Claimed just as the pool began to stop: hand it back without spending an
                # attempt.
                self._hand_in(slot, Outcome.INTERRUPTED, "the pool stopped before the job started")
                continue
            try:
                run = Run(
                    job.command,
                    timeout=job.timeout or ctx.settings.job_timeout,
                    output_limit=ctx.settings.output_limit,
                    kill_grace=ctx.settings.kill_grace,
                    env=job_environment(
                        job.id,
                        job.runs,
                        slot.worker_id,
                        job.job_type,
                        job.payload,
                        job.environment,
                    ),
                    stdin=None if job.job_type is None else (job.payload or "null").encode(),
                    separate_stderr=ctx.settings.output_streams == "separate",
                    cwd=job.cwd,
                )
                slot.run = run
                self._by_run[id(run)] = slot
                supervisor.start(run)
            except Exception as error:
                # A bug while starting one job fails that job, visibly, and nothing else.
                events.event(
                    "worker error",
                    level=logging.ERROR,
                    exc_info=True,
                    worker=slot.worker_id,
                    job=job.id,
                )
                if slot.run is not None:
                    self._by_run.pop(id(slot.run), None)
                    slot.run.close()
                    slot.run = None
                self._hand_in(slot, Outcome.FAILED, f"internal error in the worker: {error!r}")

    def _report(self, worker_id: str, settlement: Settlement, result: SettleResult) -> None:
        job = settlement.job
        totals = self.ctx.totals
        base: dict[str, Any] = {"job": job.id, "worker": worker_id, "attempt": job.runs}
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
        if settlement.outcome is Outcome.INTERRUPTED:
            totals.add("interrupted")
            events.event("interrupted", **base, state=result.state.value, reason=settlement.error)
            return
        if result.state is JobState.CANCELLED:  # cancelled, or failed once a cancel was asked
            totals.add("cancelled")
            events.event(
                "cancelled",
                **base,
                outcome=settlement.outcome.value,
                exit_code=settlement.exit_code,
                duration_ms=duration,
            )
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

    def _record_on_the_way_out(self, store: Store, crash: Exception | None) -> None:
        """After a crash, record what is known: results not yet written, and the jobs whose
        commands were just killed, as failed by an internal error. (After a normal stop there
        is nothing left.) Tried for up to RECORD_AT_EXIT seconds; what still fails the pool
        recovers as lost."""
        for slot in self.slots:
            if slot.job is not None:  # its command was running
                self._hand_in(slot, Outcome.FAILED, f"internal error in the worker: {crash!r}")
        if not self._unrecorded:
            return
        give_up_at = time.monotonic() + RECORD_AT_EXIT
        retry_store_call(
            "record results", lambda: self._send(store, []), lambda: time.monotonic() >= give_up_at
        )

    def _mark_stopped(self, store: Store) -> None:
        now = store.now()
        for worker_id in self.worker_ids:
            try:
                store.set_worker_status(worker_id, WorkerStatus.STOPPED, None, now)
            except StoreError as error:
                # The pool marks every worker stopped again on its way out.
                events.event(
                    "database error", level=logging.WARNING, worker=worker_id, error=str(error)
                )
