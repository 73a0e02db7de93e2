"""The console's actions that change the queue: enqueue, retry dead jobs, start and stop worker
pools. Each goes through the same `service` function as its CLI twin, in a thread worker on the
console's writer connection, and is refused in read-only mode."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work

from .. import control, service
from ..display import printable
from ..models import JobSpec, JobState
from ..store import EnqueueResult, StoreError
from .screens.confirm import ConfirmScreen
from .screens.enqueue import EnqueueScreen
from .screens.start_pool import StartPoolScreen

if TYPE_CHECKING:
    from .app import QueueConsole


DEAD_IDS_PER_READ = 5_000


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
    """Mixed into QueueConsole, whose reader, writer, settings and helpers these use. Each
    method names its `self` as the console, which mypy accepts only with an ignore: a mixin
    is not a supertype of the class it is mixed into until that class exists."""

    def action_new_job(self: QueueConsole) -> None:  # type: ignore[misc]
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

    def enqueue_spec(self: QueueConsole, spec: JobSpec) -> EnqueueResult:  # type: ignore[misc]
        """Called from the form's thread worker."""
        return service.enqueue(self.writer, self.settings, spec)

    @work(thread=True, group="write")
    def retry_jobs(self: QueueConsole, job_ids: list[str]) -> None:
        try:
            outcome = control.retry_dead(self.writer, job_ids, self.operator)
        except StoreError as error:
            self.tell_error(error)
            return
        self.tell_done(retried_message(outcome))

    def action_retry_all(self: QueueConsole) -> None:  # type: ignore[misc]
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
    def collect_dead_ids(
        self: QueueConsole, dialog: ConfirmScreen, search: str, ids: list[str]
    ) -> None:
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

    def ask_retry_all(self: QueueConsole, dialog: ConfirmScreen, search: str, count: int) -> None:  # type: ignore[misc]
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
    def action_start_pool(self: QueueConsole) -> None:  # type: ignore[misc]
        if self.refuse_readonly():
            return

        def chosen(count: int | None) -> None:
            if count:
                self.start_pool(count)

        self.push_screen(StartPoolScreen(self.settings.default_workers), chosen)

    @work(thread=True, group="write")
    def start_pool(self: QueueConsole, count: int) -> None:
        try:
            from ..engine.pool import PoolOptions, start_detached

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

    def action_stop_pools(self: QueueConsole) -> None:  # type: ignore[misc]
        if self.refuse_readonly():
            return
        active = self.snapshot.counts.active_workers if self.snapshot else 0
        message = Text(
            f"Every running pool ({active} active worker{'s' if active != 1 else ''}) stops "
            "claiming jobs, lets the jobs in flight finish, and exits."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.stop_pools()

        self.push_screen(ConfirmScreen("Stop all worker pools?", message, "Stop pools"), answered)

    @work(thread=True, group="write")
    def stop_pools(self: QueueConsole) -> None:
        try:
            stopped = service.request_stop(self.writer)
            pools = len({worker.pool_id for worker in stopped})
            control.stop_requested(self.writer, pools, len(stopped), self.operator)
        except StoreError as error:
            self.tell_error(error)
            return
        self.tell_done("Stop requested: pools finish their jobs and exit.")
