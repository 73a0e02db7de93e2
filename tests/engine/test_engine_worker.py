"""A pool inside the test process, to inject faults: a bug while handling a job, and a
database that stays locked beyond the store's own retries."""

from __future__ import annotations

import io
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import InProcessPool, process_alive, wait_until

from queuectl_tui.engine import dispatch, events
from queuectl_tui.lifecycle import RetryPolicy
from queuectl_tui.models import JobSpec, JobState, Outcome, WorkerStatus
from queuectl_tui.store import SQLiteStore, Store, StoreBusyError, open_store
from queuectl_tui.timeutil import now_ms


def enqueue(database: str, job_id: str, command: str, **fields: Any) -> None:
    with open_store(database) as store:
        store.enqueue(JobSpec(job_id, command, **fields), 0, now_ms())


def get(database: str, job_id: str):
    with open_store(database) as store:
        job = store.get(job_id)
    assert job is not None
    return job


def test_a_bug_while_starting_a_job_fails_that_job_and_the_pool_carries_on(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = dispatch.job_environment

    def faulty(job_id: str, *rest: Any) -> dict[str, str]:
        if job_id == "boom":
            raise RuntimeError("injected fault")
        return real(job_id, *rest)

    monkeypatch.setattr(dispatch, "job_environment", faulty)
    pool = InProcessPool(database, count=2)
    enqueue(database, "boom", "true", max_retries=0)
    wait_until(lambda: get(database, "boom").state is JobState.DEAD, what="boom to be dead")
    job = get(database, "boom")
    assert job.last_error == "internal error in the worker: RuntimeError('injected fault')"
    [error] = pool.events("worker error")
    assert "injected fault" in error["traceback"]
    enqueue(database, "after", "true")
    wait_until(lambda: get(database, "after").state is JobState.COMPLETED, what="after")
    assert pool.stop() == 0
    assert pool.events("worker replaced") == []
    with open_store(database) as store:
        workers = store.list_workers()
    assert len(workers) == 2 and sum(w.jobs_failed for w in workers) == 1
    assert all(w.status is WorkerStatus.STOPPED for w in workers)


def crash_when_finished(monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """Make the dispatcher crash (an injected bug) when a run of `command` ends."""
    real = dispatch.Dispatcher._finished

    def faulty(self: dispatch.Dispatcher, run) -> None:
        if run.command == command:
            raise RuntimeError("injected crash")
        real(self, run)

    monkeypatch.setattr(dispatch.Dispatcher, "_finished", faulty)


def test_a_crashed_dispatcher_records_its_jobs_and_fresh_workers_take_over(
    database: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    crash_when_finished(monkeypatch, "echo boom")
    pidfile = tmp_path / "victim.pid"
    enqueue(database, "victim", f"sleep 30 & echo $! > {pidfile}; wait", max_retries=0)
    pool = InProcessPool(database, count=2)
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="victim to run")
    enqueue(database, "boom", "echo boom", max_retries=0)
    [replaced, _] = wait_until(lambda: pool.events("worker replaced"), what="replacements")
    # The killed command's job and the one the dispatcher choked on are both recorded.
    for job_id in ("victim", "boom"):
        job = get(database, job_id)
        assert job.state is JobState.DEAD
        assert job.last_error == "internal error in the worker: RuntimeError('injected crash')"
    assert not process_alive(int(pidfile.read_text()))
    [error] = pool.events("dispatcher error")
    assert "injected crash" in error["traceback"]
    enqueue(database, "after", "true")
    wait_until(lambda: get(database, "after").state is JobState.COMPLETED, what="after")
    assert pool.stop() == 0
    with open_store(database) as store:
        workers = {w.id: w for w in store.list_workers()}
    assert len(workers) == 4 and replaced["replacement"] in workers
    assert all(w.status is WorkerStatus.STOPPED for w in workers.values())


@pytest.mark.sqlite_only
def test_a_database_locked_beyond_the_busy_timeout_is_retried_not_lost(
    database: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    failures = {"claim": 2, "settle": 3}
    real_exchange = SQLiteStore.exchange

    def locked(self, request):
        name = "settle" if request.settlements else "claim"
        if failures[name] > 0:
            failures[name] -= 1
            raise StoreBusyError("the database stayed locked for 60 s")
        return real_exchange(self, request)

    enqueue(database, "steady", "echo once >> " + str(tmp_path / "runs"))
    monkeypatch.setattr(SQLiteStore, "exchange", locked)
    pool = InProcessPool(database, count=1)
    wait_until(lambda: get(database, "steady").state is JobState.COMPLETED, what="steady")
    assert pool.stop() == 0
    assert (tmp_path / "runs").read_text() == "once\n"
    with open_store(database) as store:
        assert [a.outcome for a in store.attempts("steady")] == [Outcome.COMPLETED]
    retried = pool.events("database error, retrying")
    assert {r["action"] for r in retried} == {"record results and claim jobs"}
    assert len(retried) == 5


def test_a_worker_declared_lost_while_alive_registers_again(database: str) -> None:
    pool = InProcessPool(database, count=1)
    with open_store(database) as store:
        [worker] = store.list_workers()
        store.recover_orphans([worker.id], RetryPolicy(), now_ms())
        assert store.list_workers()[0].status is WorkerStatus.LOST
    wait_until(
        lambda: pool.events("worker declared lost by another pool, re-registering"),
        what="the pool to notice",
    )

    def registered_again() -> bool:  # the event is logged just before the write
        with open_store(database) as store:
            return store.list_workers()[0].status is WorkerStatus.IDLE

    wait_until(registered_again, what="the worker to be registered again")
    enqueue(database, "still-working", "true")
    wait_until(lambda: get(database, "still-working").state is JobState.COMPLETED, what="job")
    assert pool.stop() == 0


def test_human_log_lines_are_one_event_per_line() -> None:
    stream = io.StringIO()
    events.configure("human", stream=stream)
    events.event("claimed", job="a b", worker="h:1:1", attempt=1, skipped=None)
    events.event("failed", level=logging.WARNING, job="x", error='exit "3"\nmore')
    logging.getLogger(events.LOGGER_NAME).handlers.clear()
    first, second = stream.getvalue().splitlines()
    assert first.endswith(' claimed job="a b" worker=h:1:1 attempt=1')
    assert first[:4].isdigit() and first[10] == "T"
    assert 'failed [WARNING] job=x error="exit \\"3\\"\\nmore"' in second


def test_json_log_lines_parse() -> None:
    stream = io.StringIO()
    events.configure("json", stream=stream)
    events.event("retry scheduled", job="j", delay_s=2.0)
    logging.getLogger("queuectl.store").warning("database locked, retrying in %d ms", 5)
    logging.getLogger(events.LOGGER_NAME).handlers.clear()
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["event"] == "retry scheduled"
    assert (first["job"], first["delay_s"], first["level"]) == ("j", 2.0, "info")
    assert first["ts"].endswith("Z")
    assert second["event"] == "log"
    assert second["message"] == "database locked, retrying in 5 ms"
    assert second["level"] == "warning"


@pytest.mark.sqlite_only
def test_a_locked_database_does_not_hold_up_timeouts(database: str, tmp_path: Path) -> None:
    pidfile, go, done = tmp_path / "victim.pid", tmp_path / "go", tmp_path / "done"
    enqueue(database, "victim", f"echo $$ > {pidfile}; exec sleep 30", timeout=2.0, max_retries=0)
    # Told to end once the database is locked: its result then waits for the lock.
    finishing = f"until [ -e {go} ]; do sleep 0.01; done; touch {done}"
    enqueue(database, "finishes-meanwhile", finishing)
    pool = InProcessPool(database, count=2)
    pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="victim"))
    wait_until(lambda: len(pool.events("claimed")) == 2, what="both jobs to start")
    # Another writer (a long bulk enqueue, say) holds the write lock until the pool has met
    # it and the timeout has been enforced regardless.
    locker = sqlite3.connect(database, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        running_when_locked = process_alive(pid)
        go.touch()
        wait_until(done.exists, what="finishes-meanwhile to end while the database is locked")
        wait_until(lambda: not process_alive(pid), timeout=30, what="the victim's timeout")
        # Whichever of its threads writes first meets it: the dispatcher (which retries) or
        # the heartbeat (while it waits, the dispatcher waits in line behind it, silently).
        met = ("database error, retrying", "heartbeat failed")
        wait_until(
            lambda: any(pool.events(name) for name in met), timeout=30, what="the pool to meet it"
        )
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    # The one thing left to timing: the lock was taken within the victim's 2 s.
    assert running_when_locked, "the victim had timed out before the database was locked"
    wait_until(lambda: get(database, "victim").state is JobState.DEAD, what="victim recorded")
    wait_until(lambda: get(database, "finishes-meanwhile").state is JobState.COMPLETED, what="it")
    assert get(database, "victim").last_error == "timed out after 2 s"
    assert pool.stop() == 0


class FlakyLog(io.StringIO):
    """A log stream whose next write of a "completed" line fails, as a full disk would."""

    fail_next = False

    def write(self, text: str) -> int:
        if self.fail_next and "completed" in text:
            self.fail_next = False
            raise OSError(28, "No space left on device")
        return super().write(text)


def test_a_log_that_cannot_be_written_harms_no_job(database: str, tmp_path: Path) -> None:
    log = FlakyLog()
    go = tmp_path / "go"  # "long" runs until "short" is done, however slow the machine
    enqueue(database, "long", f"until [ -e {go} ]; do sleep 0.02; done", max_retries=0)
    pool = InProcessPool(database, count=2, log=log)
    wait_until(lambda: pool.events("claimed"), what="long to start")
    log.fail_next = True
    enqueue(database, "short", "true", max_retries=0)
    # Its line is written after its result is stored: wait for the write that fails.
    wait_until(lambda: not log.fail_next, what="short's completed line to fail")
    assert get(database, "short").state is JobState.COMPLETED
    go.touch()
    completed = wait_until(lambda: pool.events("completed"), what="long's completed line")
    assert [e["job"] for e in completed] == ["long"]  # logged after the failure
    assert get(database, "long").state is JobState.COMPLETED
    assert pool.events("dispatcher error") == []
    assert pool.stop() == 0


def test_a_crash_also_stops_what_a_finished_command_left_behind(
    database: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    crash_when_finished(monkeypatch, "echo boom")
    pidfile, ready = tmp_path / "leftover.pid", tmp_path / "ready"
    # The shell exits as soon as its background child ignores TERM, so the run waits out the
    # grace period before KILL when the dispatcher crashes.
    command = (
        f"(trap '' TERM; touch {ready}; exec sleep 30) & "
        f"until [ -e {ready} ]; do sleep 0.01; done; echo $! > {pidfile}"
    )
    enqueue(database, "victim", command, max_retries=0)
    pool = InProcessPool(database, count=2, kill_grace=30.0)
    pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="child"))
    enqueue(database, "boom", "echo boom", max_retries=0)
    wait_until(lambda: pool.events("worker replaced"), what="the replacement")
    wait_until(lambda: not process_alive(pid), what="the leftover to be killed")
    assert get(database, "victim").state is JobState.DEAD
    assert pool.stop() == 0


def test_jobs_one_at_a_time_are_spread_over_the_workers(database: str) -> None:
    pool = InProcessPool(database, count=3)
    for number in range(6):
        enqueue(database, f"one-{number}", "true")

        def completed(job_id: str = f"one-{number}") -> bool:
            return get(database, job_id).state is JobState.COMPLETED

        wait_until(completed)
    assert pool.stop() == 0
    with open_store(database) as store:
        assert sorted(w.jobs_done for w in store.list_workers()) == [2, 2, 2]


def test_a_pool_claims_registers_and_beats_by_its_store_s_clock(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ahead_ms = 600_000  # the database's clock, ten minutes ahead of this host's

    def open_ahead(*args: Any, **kwargs: Any) -> Store:
        store = open_store(*args, **kwargs)
        store.now = lambda: now_ms() + ahead_ms  # type: ignore[method-assign]
        return store

    monkeypatch.setattr("queuectl_tui.engine.pool.open_store", open_ahead)  # all it opens
    started = now_ms()
    enqueue(database, "due", "true", run_at=started + 300_000)  # due by the store's clock only
    pool = InProcessPool(database, count=1)
    try:
        wait_until(lambda: get(database, "due").state is JobState.COMPLETED, what="the job")
        done = now_ms()

        def beaten() -> bool:  # an idle pool's heartbeat, after the job
            with open_store(database) as store:
                [worker] = store.list_workers()
            return worker.last_heartbeat > done + ahead_ms

        wait_until(beaten, what="a heartbeat")
    finally:
        stopped = pool.stop()
    assert stopped == 0
    with open_store(database) as store:
        [worker] = store.list_workers()
        [attempt] = store.attempts("due")
    assert worker.status is WorkerStatus.STOPPED
    assert started + ahead_ms <= worker.started_at < worker.last_heartbeat
    assert attempt.started_at >= worker.started_at and attempt.finished_at >= attempt.started_at
