"""The console's actions that change the queue: enqueue, retry dead jobs, start and stop worker
pools. Each goes through the same `service` function as its CLI twin, in a thread worker on the
console's writer connection, and is refused in read-only mode."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work

from .. import control, service
from ..display import printable
from ..models import ACTIVE_WORKER_STATUSES, JobSpec, JobState, Worker
from ..store import EnqueueResult, StoreError
from .data import Pane
from .screens.confirm import ConfirmScreen
from .screens.enqueue import EnqueueScreen
from .screens.start_pool import StartPoolScreen

if TYPE_CHECKING:
    from .console_parts import Console


DEAD_IDS_PER_READ = 5_000


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def retried_message(outcome: control.RetryOutcome) -> str:
    """How many were retried and, when some were not dead any more, how many were skipped."""
    retried = outcome.retried
    if len(retried) == 1:
        message = f"Job {printable(retried[0], True)} is pending again"
    else:
        message = f"{len(retried):,} dead jobs are pending again"
    skipped = len(outcome.not_dead) + len(outcome.unknown)
    if skipped:
        message += f"; {skipped:,} skipped: no longer dead"
    return message + "."


class QueueOperations:
    """Mixed into QueueConsole, whose reader, writer, settings and helpers these use: each
    method's `self` is what console_parts.Console says the console gives its parts."""

    def action_new_job(self: Console) -> None:
        if self.refuse_readonly():
            return

        def done(result: EnqueueResult | None) -> None:
            if result is None:
                return
            name = printable(result.job.id, True)
            if result.created:
                self.notify(f"Enqueued job {name}", markup=False)
            else:
                key = printable(result.job.idempotency_key or "", True)
                message = f"Job {name} already holds idempotency key '{key}'; nothing added"
                self.notify(message, markup=False, severity="warning")
            self.poll(force=True)

        self.push_screen(EnqueueScreen(self.enqueue_spec, self.clock), done)

    def enqueue_spec(self: Console, spec: JobSpec) -> EnqueueResult:
        """Called from the form's thread worker."""
        return service.enqueue(self.writer, self.settings, spec)

    @work(thread=True, group="write")
    def retry_jobs(self: Console, job_ids: list[str]) -> None:
        try:
            outcome = control.retry_dead(self.writer, job_ids, self.operator)
        except StoreError as error:
            self.tell_error(error)
            return
        self.tell_done(retried_message(outcome))

    def action_retry_all(self: Console) -> None:
        """Ask about exactly the dead jobs there are now (all of them, however many pages),
        and retry exactly those that are still dead when the operator says yes."""
        if self.refuse_readonly():
            return
        ids: list[str] = []
        dialog = ConfirmScreen(
            "Retry all dead jobs?", Text("Counting the dead jobs…", style="dim"), "Retry", True
        )

        def answered(yes: bool | None) -> None:
            if yes and ids:
                self.retry_jobs(ids)

        self.push_screen(dialog, answered)
        self.collect_dead_ids(dialog, self.search, ids)

    @work(thread=True, group="read-once")
    def collect_dead_ids(self: Console, dialog: ConfirmScreen, search: str, ids: list[str]) -> None:
        after: int | None = None
        try:
            while not self.closing:
                page = self.reader.list_jobs(
                    JobState.DEAD,
                    limit=DEAD_IDS_PER_READ,
                    after_seq=after,
                    newest_first=True,
                    search=search or None,
                )
                ids.extend(job.id for job in page)
                if len(page) < DEAD_IDS_PER_READ:
                    break
                after = page[-1].seq
        except StoreError as error:
            self.deliver(dialog.dismiss, False)
            self.tell_error(error)
            return
        self.deliver(self.ask_retry_all, dialog, search, len(ids))

    def ask_retry_all(self: Console, dialog: ConfirmScreen, search: str, count: int) -> None:
        if not dialog.is_attached:
            return  # answered no while counting
        if count == 0:
            dialog.dismiss(False)
            self.notify("There are no dead jobs to retry.", severity="warning")
            return
        noun = "dead job" if count == 1 else "dead jobs"
        message = Text(f"Return {count:,} {noun}")
        if search:
            message.append(" matching ")
            message.append(printable(search, single_line=True), style="bold")
        message.append(" to pending with a fresh retry budget?")
        dialog.ask(f"Retry {count:,} {noun}?", message, f"Retry {count:,}")

    # -- worker pools ---------------------------------------------------------------------------
    def action_start_pool(self: Console) -> None:
        if self.refuse_readonly():
            return

        def chosen(count: int | None) -> None:
            if count:
                self.start_pool(count)

        self.push_screen(StartPoolScreen(self.settings.default_workers), chosen)

    @work(thread=True, group="write")
    def start_pool(self: Console, count: int) -> None:
        try:
            from ..engine.detach import PoolOptions, start_detached

            launched = start_detached(
                self.settings, PoolOptions(count=count, log_format="human"), self.config_path
            )
        except ImportError:
            message = "The worker engine is not installed; run `queuectl worker start` instead."
            self.deliver(self.notify, message, severity="error", markup=False)
            return
        except (OSError, StoreError) as error:
            message = f"Could not start a pool: {error}"
            self.deliver(self.notify, message, severity="error", markup=False)
            return
        noun = "worker" if count == 1 else "workers"
        message = f"Started a pool of {count} {noun} (pid {launched.pid}). Log: {launched.log_path}"
        self.deliver(self.notify, message, markup=False, timeout=8)
        self.deliver(self.poll, True)

    def action_stop_pools(self: Console) -> None:
        self._ask_stop(forced=False)

    def action_force_stop_pools(self: Console) -> None:
        self._ask_stop(forced=True)

    def _selected_pool(self: Console) -> list[Worker] | None:
        """On the Workers pane, the active workers of the selected worker's pool (x and X stop
        that pool only; none when it has ended). Elsewhere None: they stop every pool."""
        if self.pane is not Pane.WORKERS:
            return None
        selected = self.table_for(Pane.WORKERS).selected_item()
        if not isinstance(selected, Worker):
            return None
        if selected.status not in ACTIVE_WORKER_STATUSES:
            return []
        rows = self.table_for(Pane.WORKERS).items
        return [
            worker
            for worker in rows
            if isinstance(worker, Worker)
            and worker.pool_id == selected.pool_id
            and worker.status in ACTIVE_WORKER_STATUSES
        ]

    def _ask_stop(self: Console, forced: bool) -> None:
        if self.refuse_readonly():
            return
        members = self._selected_pool()
        if members == []:
            ended = "That worker's pool is not running; select a running worker to stop its pool."
            self.notify(ended, severity="warning")
            return
        pool = members[0].pool_id if members else None
        if members:
            workers = len(members)
            busy = sum(1 for worker in members if worker.current_job)
            subject = f"Pool {printable(pool, True)} ({_count(workers, 'worker')})"
            title = f"{'Force stop' if forced else 'Stop'} pool {printable(pool, True)}?"
        else:
            workers = self.snapshot.counts.active_workers if self.snapshot else 0
            busy = self.snapshot.counts.by_state.get(JobState.PROCESSING, 0) if self.snapshot else 0
            subject = f"Every running pool ({_count(workers, 'active worker')})"
            title = f"{'Force stop' if forced else 'Stop'} all worker pools?"
        if not busy:
            message = Text(f"{subject} stops claiming jobs and exits: no job is running.")
        elif forced:
            message = Text(
                f"{subject} stops its {_count(busy, 'running command')} now and exits; "
                f"{'the job goes' if busy == 1 else 'their jobs go'} back to waiting without "
                "spending an attempt."
            )
        else:
            message = Text(
                f"{subject} stops claiming jobs, lets the {_count(busy, 'job')} in flight "
                "finish, and exits. X forces it."
            )

        def answered(yes: bool | None) -> None:
            if yes:
                self.stop_pools(pool, forced)

        label = "Force stop" if forced else "Stop"
        self.push_screen(ConfirmScreen(title, message, label), answered)

    @work(thread=True, group="write")
    def stop_pools(self: Console, pool: str | None, forced: bool) -> None:
        stale = self.settings.stale_worker_timeout
        try:
            stopped = service.stop_pools(self.writer, stale, self.operator, pool, forced)
        except (StoreError, service.NotFoundError) as error:
            self.tell_error(error)
            return
        if not stopped:
            self.tell_done("No worker pool is running.")
            return
        if pool is None:
            done = "stop their running commands now" if forced else "finish their jobs"
            self.tell_done(f"Stop requested: pools {done} and exit.")
            return
        name = printable(pool, True)
        done = "stops its running commands now" if forced else "finishes its jobs"
        self.tell_done(f"Stop requested: pool {name} {done} and exits.")
