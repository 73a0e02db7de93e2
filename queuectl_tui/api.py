"""The queue for Python programs that feed and watch it, on the same service functions as the
CLI and the console:

    from queuectl_tui import Queue

    with Queue("queue.db") as queue:
        job = queue.enqueue("echo hello", priority=5)
        print(queue.get(job.id).state)

Input is validated by the rules `queuectl enqueue` applies; a refused job raises InvalidInput
(its `field` names the culprit) and writes nothing. A worker pool (`queuectl worker start`)
runs the jobs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from types import TracebackType
from typing import Any

from . import control, schedule_ops, service
from .config import Settings
from .errors import InvalidInput
from .location import normalise, shown
from .models import (
    STATES,
    Attempt,
    Job,
    JobLinks,
    JobState,
    QueueCounts,
    QueueInfo,
    Worker,
    parse_job_spec,
    queue_name,
)
from .store import BulkEnqueueResult, QueueStats, Store


class Queue:
    """One queue database. Safe to share between threads; open one per process."""

    def __init__(
        self, database: str | os.PathLike[str] = "queue.db", settings: Settings | None = None
    ) -> None:
        """`database` is a path or a `sqlite:///` URL. `settings` gives the defaults a job
        does not set (max_retries, the file mode); its own `database` is ignored."""
        location = normalise(os.fspath(database))
        self.settings = replace(settings or Settings(), database=location)
        self._store: Store = service.open_queue(self.settings)
        self._operator = control.local_operator("api")

    # -- feeding -------------------------------------------------------------------------------
    def enqueue(
        self,
        command: str,
        *,
        id: str | None = None,
        priority: int | None = None,
        run_at: datetime | str | None = None,
        delay: str | float | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        queue: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        after: Iterable[str] | str | None = None,
        after_any_end: bool = False,
    ) -> Job:
        """Add one job; durable when this returns. With an `idempotency_key` that a job holds
        already, that job is returned and nothing is added. A naive `run_at` is UTC; `delay`
        ('10m', or seconds) runs it that long from now instead. `cwd` and `env`: where its
        runs start and what they find in their environment beside the pool's. `after`: the
        ids of jobs it runs after (it waits in state waiting until they have completed; if
        one ends otherwise it is cancelled, unless `after_any_end`)."""
        fields: dict[str, Any] = {
            "id": id,
            "command": command,
            "priority": priority,
            "run_at": run_at.isoformat() if isinstance(run_at, datetime) else run_at,
            "delay": delay,
            "max_retries": max_retries,
            "timeout": timeout,
            "idempotency_key": idempotency_key,
            "queue": queue,
            "cwd": cwd,
            "env": None if env is None else dict(env),
            "after": after if after is None or isinstance(after, str) else list(after),
            "after_any_end": after_any_end or None,
        }
        spec = parse_job_spec({key: value for key, value in fields.items() if value is not None})
        return service.enqueue(self._store, self.settings, spec).job

    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> BulkEnqueueResult:
        """Add many jobs in one transaction, all or nothing: each a mapping with the fields of
        `enqueue` (`command` required). Jobs whose idempotency key is taken are skipped."""
        specs = []
        for number, job in enumerate(jobs, start=1):
            try:
                specs.append(parse_job_spec(dict(job), self.settings.job_types))
            except InvalidInput as error:
                raise InvalidInput(f"job {number}: {error}", error.field) from None
        return service.enqueue_specs(self._store, self.settings, specs)

    def links(self, job_id: str) -> JobLinks:
        """The jobs `job_id` runs after (each with its state and how it ended for this job),
        and the jobs that run after it."""
        return service.job_links(self._store, job_id)

    def retry(self, *job_ids: str) -> control.RetryOutcome:
        """Send dead jobs back to pending with a fresh retry budget: these, or every dead job
        when none is named."""
        return control.retry_dead(self._store, list(job_ids) if job_ids else None, self._operator)

    # -- control (each in the audit trail, face "api") ------------------------------------------
    def cancel(self, *job_ids: str) -> control.Report:
        """Cancel jobs: waiting ones at once, running ones stopped by their pools."""
        return control.cancel_jobs(self._store, list(job_ids), self._operator)

    def delete(self, *job_ids: str) -> control.Report:
        """Remove finished or waiting jobs with their attempts (running ones are refused)."""
        return control.delete_jobs(self._store, list(job_ids), self._operator)

    def pause(self, queue: str) -> None:
        """No pool claims the queue's jobs until `resume`."""
        control.set_paused(self._store, queue, True, self._operator)

    def resume(self, queue: str) -> None:
        control.set_paused(self._store, queue, False, self._operator)

    def queues(self) -> list[QueueInfo]:
        """Every queue with its depth, running jobs, pause and limit."""
        return control.queue_overview(self._store)

    def workers(self, history: bool = False) -> list[Worker]:
        """The workers of the pools, as `queuectl workers` shows them: running ones, and
        those that ended in the last hour (with `history`, every stored one)."""
        stale = self.settings.stale_worker_timeout
        return service.shown_workers(self._store, stale, history=history)

    def stop_pools(self, pool: str | None = None, force: bool = False) -> list[Worker]:
        """Ask every running pool, or the one `pool` names (its id or one of its workers'
        ids; NotFound if none runs), to stop: once its jobs in flight finish, or with `force`
        now, the jobs it ran going back to waiting. Returns the workers asked."""
        stale = self.settings.stale_worker_timeout
        return service.stop_pools(self._store, stale, self._operator, pool, force)

    # -- schedules (each change in the audit trail, face "api") ----------------------------------
    def add_schedule(
        self,
        name: str,
        command: str | None = None,
        *,
        cron: str | None = None,
        every: str | None = None,
        timezone: str | None = None,
        catch_up: str | None = None,
        type: str | None = None,
        payload: Any = None,
        queue: str | None = None,
        priority: int | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> schedule_ops.ScheduleView:
        """Add a periodic job: `cron` ('0 2 * * *', '@daily', '@every 5m') read in
        `timezone` (default UTC), or `every` ('30s', '5m'); each tick makes one job of
        `command` (or of job type `type` with `payload`), whichever pool fires it. `catch_up`
        says what becomes of ticks missed while no pool ran: 'none', 'one' (default), 'all'."""
        fields: dict[str, Any] = {
            "cron": cron,
            "every": every,
            "timezone": timezone,
            "catch_up": catch_up,
            "command": command,
            "type": type,
            "payload": payload,
            "queue": queue,
            "priority": priority,
            "timeout": timeout,
            "max_retries": max_retries,
            "cwd": cwd,
            "env": None if env is None else dict(env),
        }
        given = {key: value for key, value in fields.items() if value is not None}
        return schedule_ops.add_schedule(self._store, self.settings, name, given, self._operator)

    def schedules(self) -> list[schedule_ops.ScheduleView]:
        """Every schedule by name, each with its last job."""
        return schedule_ops.list_schedules(self._store)

    def schedule(self, name: str) -> schedule_ops.ScheduleView:
        """One schedule; NotFound if there is none of that name."""
        return schedule_ops.get_schedule(self._store, name)

    def pause_schedule(self, name: str) -> schedule_ops.ScheduleView:
        """No pool fires it until `resume_schedule`."""
        return schedule_ops.pause_schedule(self._store, name, self._operator)

    def resume_schedule(self, name: str) -> schedule_ops.ScheduleView:
        """It goes on from its next tick after now."""
        return schedule_ops.resume_schedule(self._store, name, self._operator)

    def remove_schedule(self, name: str) -> None:
        """Remove it; the jobs it made stay."""
        schedule_ops.remove_schedule(self._store, name, self._operator)

    def run_schedule(self, name: str) -> Job:
        """Make one job of it now, outside its ticks; returns that job."""
        return schedule_ops.run_schedule(self._store, self.settings, name, self._operator)

    # -- watching ------------------------------------------------------------------------------
    def get(self, job_id: str) -> Job:
        """The job as it is now; NotFound if the queue does not know it."""
        return service.get_job(self._store, job_id)

    def attempts(self, job_id: str) -> list[Attempt]:
        """Every run of the job so far, oldest first."""
        return service.job_history(self._store, job_id)[1]

    def list(
        self,
        state: JobState | str | None = None,
        limit: int = 50,
        after_seq: int | None = None,
        newest_first: bool = False,
    ) -> list[Job]:
        """One page of jobs in creation order (or newest first); pass the last job's `seq`
        as `after_seq` for the next page."""
        wanted = _state(state)
        return service.list_jobs(self._store, wanted, limit, after_seq, newest_first).jobs

    def status(self, queue: str | None = None) -> QueueCounts:
        """Jobs per state (of one queue, if given) and the number of active workers."""
        return service.queue_status(self._store, _queue(queue))

    def stats(self, queue: str | None = None) -> QueueStats:
        """Throughput, attempt totals and latency percentiles (of one queue, if given)."""
        return service.queue_stats(self._store, _queue(queue))

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Queue({shown(self.settings.database)!r})"


def _queue(name: str | None) -> str | None:
    return None if name is None else queue_name(name)


def _state(state: JobState | str | None) -> JobState | None:
    if state is None or isinstance(state, JobState):
        return state
    try:
        return JobState(state)
    except ValueError:
        names = ", ".join(known.value for known in STATES)
        raise InvalidInput(f"unknown state {state!r} (known: {names})", "state") from None
