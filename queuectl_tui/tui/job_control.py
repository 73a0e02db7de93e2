"""The console's control of the selected job and its queue: cancel, delete, retry (dead and
cancelled jobs afresh, failed ones now) and pause or resume the queue. Each asks first where
it cannot be undone, names what it will touch, and goes through the same `control` call as
its CLI twin (recorded in the audit trail as the console's), in a thread worker on the
console's writer connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work

from .. import control
from ..display import printable
from ..error_groups import ErrorGroup
from ..errors import InvalidInput, NotFound
from ..lifecycle import Effect, Operation, after_operator
from ..models import Job, JobState, QueueInfo
from ..store import StoreError
from .data import Pane
from .screens.confirm import ConfirmScreen
from .screens.prune import PruneChoice, PruneScreen
from .screens.queue_limit import NO_LIMIT, QueueLimitScreen

if TYPE_CHECKING:
    from .console_parts import Console


def _name(job_id: str) -> str:
    return printable(job_id, single_line=True)


class JobControl:
    """Mixed into QueueConsole: each method's `self` is a console_parts.Console."""

    def _selected_for(self: Console, what: str) -> Job | None:
        if self.refuse_readonly():
            return None
        job = self.selected_job()
        if job is None:
            self.notify(f"Select a job to {what} first.", severity="warning")
        return job

    # -- cancel ---------------------------------------------------------------------------------
    def action_cancel_selected(self: Console) -> None:
        if self.marks and not self.refuse_readonly():
            self.ask_about_marked("cancel")
            return
        job = self._selected_for("cancel")
        if job is not None:
            self.ask_cancel(job)

    def ask_cancel(self: Console, job: Job) -> None:
        effect = after_operator(job.state, Operation.CANCEL).effect
        if effect is Effect.REFUSED:
            self.notify(
                f"Job {_name(job.id)} is {job.state.value}; there is nothing to cancel.",
                severity="warning",
                markup=False,
            )
            return
        if effect is Effect.REQUESTED:
            message = Text(
                "It is running: its pool stops every process of the run within a second, and "
                "the job ends cancelled, not retried."
            )
        else:
            message = Text(f"It is {job.state.value}: it ends cancelled and does not run.")
        message.append(" Retry (r) brings it back.", style="dim")

        def answered(yes: bool | None) -> None:
            if yes:
                self.cancel_jobs([job.id])

        title = f"Cancel job {_name(job.id)}?"
        dialog = ConfirmScreen(title, message, "Cancel job", back_label="Keep it")
        self.push_screen(dialog, answered)

    @work(thread=True, group="write")
    def cancel_jobs(self: Console, job_ids: list[str]) -> None:
        try:
            report = control.cancel_jobs(self.writer, job_ids, self.operator)
        except StoreError as error:
            self.tell_error(error)
            return
        if report.pending_stop:
            message = f"Job {_name(report.pending_stop[0])} is being stopped by its pool."
        elif report.done:
            message = f"Job {_name(report.done[0])} is cancelled."
        else:
            message = "Nothing was cancelled: the job finished or went away meanwhile."
        self.tell_done(message)

    # -- delete ---------------------------------------------------------------------------------
    def action_delete_selected(self: Console) -> None:
        if self.marks and not self.refuse_readonly():
            self.ask_about_marked("delete")
            return
        job = self._selected_for("delete")
        if job is None:
            return
        if after_operator(job.state, Operation.DELETE).effect is Effect.REFUSED:
            self.notify(
                f"Job {_name(job.id)} is running; cancel it first (c), then delete it.",
                severity="warning",
                markup=False,
            )
            return
        runs = "no attempts" if job.runs == 0 else f"{job.runs} attempt{'s' * (job.runs != 1)}"
        message = Text(f"Removes the {job.state.value} job with its {runs} and their output. ")
        message.append("This cannot be undone.", style="bold")

        def answered(yes: bool | None) -> None:
            if yes:
                self.delete_jobs([job.id])

        title = f"Delete job {_name(job.id)}?"
        self.push_screen(ConfirmScreen(title, message, "Delete"), answered)

    @work(thread=True, group="write")
    def delete_jobs(self: Console, job_ids: list[str]) -> None:
        try:
            report = control.delete_jobs(self.writer, job_ids, self.operator)
        except StoreError as error:
            self.tell_error(error)
            return
        if report.done:
            message = f"Job {_name(report.done[0])} is deleted."
        else:
            message = "Nothing was deleted: the job started running or went away meanwhile."
        self.tell_done(message)

    # -- retry ----------------------------------------------------------------------------------
    def action_retry_selected(self: Console) -> None:
        if self.marks and not self.refuse_readonly():
            self.ask_about_marked("retry")
            return
        job = self._selected_for("retry")
        if job is None:
            return
        if after_operator(job.state, Operation.RETRY).effect is Effect.REFUSED:
            self.notify(
                f"Job {_name(job.id)} is {job.state.value}; only dead, cancelled and failed "
                "jobs are retried.",
                severity="warning",
                markup=False,
            )
            return
        self.ask_retry(job)

    def ask_retry(self: Console, job: Job) -> None:
        """Ask, naming the job and what a retry does to it, then retry it."""
        if after_operator(job.state, Operation.RETRY).effect is Effect.RUN_NOW:
            message = Text(
                f"It waits out its backoff ({job.attempts} of {job.max_retries + 1} attempts "
                "spent): it runs now, its attempts kept."
            )
            label = "Run now"
        else:
            message = Text(
                f"It is {job.state.value}: it goes back to pending with a fresh retry budget; "
                "its history is kept."
            )
            label = "Retry"

        def answered(yes: bool | None) -> None:
            if yes:
                self.retry_now([job.id], job.state)

        self.push_screen(ConfirmScreen(f"Retry job {_name(job.id)}?", message, label), answered)

    @work(thread=True, group="write")
    def retry_now(self: Console, job_ids: list[str], was: JobState) -> None:
        try:
            report = control.retry_jobs(self.writer, job_ids, self.operator)
        except StoreError as error:
            self.tell_error(error)
            return
        if not report.done:
            message = "Nothing was retried: the job changed meanwhile."
        elif was is JobState.FAILED:
            message = f"Job {_name(report.done[0])} is ready to run now."
        else:
            message = f"Job {_name(report.done[0])} is pending again."
        self.tell_done(message)

    # -- error groups -------------------------------------------------------------------------
    def ask_retry_group(self: Console, group: ErrorGroup) -> None:
        jobs = f"{group.count:,} dead job{'s' * (group.count != 1)}"
        message = Text(f"They failed with: {printable(group.fingerprint)}\n", style="")
        message.append("They go back to pending with a fresh retry budget.", style="dim")

        def answered(yes: bool | None) -> None:
            if yes:
                self.act_on_group("retry", group)

        self.push_screen(ConfirmScreen(f"Retry the group's {jobs}?", message, "Retry"), answered)

    def ask_delete_group(self: Console, group: ErrorGroup) -> None:
        jobs = f"{group.count:,} dead job{'s' * (group.count != 1)}"
        message = Text(f"They failed with: {printable(group.fingerprint)}\n")
        message.append("They go with their attempts and output. ")
        message.append("This cannot be undone.", style="bold")

        def answered(yes: bool | None) -> None:
            if yes:
                self.act_on_group("delete", group)

        self.push_screen(ConfirmScreen(f"Delete the group's {jobs}?", message, "Delete"), answered)

    @work(thread=True, group="write")
    def act_on_group(self: Console, what: str, group: ErrorGroup) -> None:
        call = control.retry_group if what == "retry" else control.delete_group
        try:
            report = call(self.writer, group.fingerprint, self.operator)
        except (StoreError, NotFound) as error:
            self.tell_error(error)
            return
        verb = "Retried" if what == "retry" else "Deleted"
        self.tell_done(f"{verb} {len(report.done):,} dead jobs of the group.")

    # -- the selected job's queue -------------------------------------------------------------
    def action_toggle_queue(self: Console) -> None:
        if self.pane is Pane.QUEUES:
            if self.refuse_readonly():
                return
            queue = self.table_for(Pane.QUEUES).selected_item()
            if isinstance(queue, QueueInfo):
                self.ask_about_queue(queue.name)
            else:
                self.notify("Select a queue first.", severity="warning")
            return
        job = self._selected_for("pause or resume the queue of")
        if job is not None:
            self.ask_about_queue(job.queue)

    @work(thread=True, group="read-once")
    def ask_about_queue(self: Console, name: str) -> None:
        try:
            queues = {queue.name: queue for queue in control.queue_overview(self.reader)}
        except StoreError as error:
            self.tell_error(error)
            return
        queue = queues.get(name)
        self.deliver(
            self.confirm_queue_toggle,
            name,
            queue.paused if queue else False,
            queue.waiting if queue else 0,
        )

    def confirm_queue_toggle(self: Console, name: str, paused: bool, waiting: int) -> None:
        shown = printable(name, single_line=True)
        jobs = f"{waiting:,} waiting job{'s' * (waiting != 1)}"
        if paused:
            title, label = f"Resume queue {shown}?", "Resume"
            message = Text(f"Pools take its {jobs} again.")
        else:
            title, label = f"Pause queue {shown}?", "Pause queue"
            message = Text(
                f"No pool takes its {jobs} (or new ones) until it is resumed; jobs already "
                "running finish. It stays paused across restarts."
            )

        def answered(yes: bool | None) -> None:
            if yes:
                self.set_queue_paused(name, not paused)

        self.push_screen(ConfirmScreen(title, message, label), answered)

    def action_limit_queue(self: Console) -> None:
        if self.refuse_readonly():
            return
        queue = self.table_for(Pane.QUEUES).selected_item() if self.pane is Pane.QUEUES else None
        if not isinstance(queue, QueueInfo):
            self.notify("Select a queue on the Queues pane (u) first.", severity="warning")
            return
        name = queue.name

        def chosen(limit: int | None) -> None:
            if limit is not None:
                self.set_queue_limit(name, None if limit == NO_LIMIT else limit)

        self.push_screen(QueueLimitScreen(name, queue.max_running), chosen)

    @work(thread=True, group="write")
    def set_queue_limit(self: Console, name: str, limit: int | None) -> None:
        try:
            control.set_limit(self.writer, name, limit, self.operator)
        except (StoreError, InvalidInput) as error:
            self.tell_error(error)
            return
        shown = printable(name, single_line=True)
        words = "has no limit" if limit is None else f"runs at most {limit} at once"
        self.tell_done(f"Queue {shown} {words}.")

    # -- prune ----------------------------------------------------------------------------------
    def action_prune(self: Console) -> None:
        if self.refuse_readonly():
            return

        def chosen(choice: PruneChoice | None) -> None:
            if choice is not None:
                dialog = ConfirmScreen(
                    "Prune finished jobs?", Text("Counting them…", style="dim"), "Prune", True
                )

                def answered(yes: bool | None) -> None:
                    if yes:
                        self.prune_jobs(choice)

                self.push_screen(dialog, answered)
                self.count_prunable(dialog, choice)

        self.push_screen(PruneScreen(self.clock), chosen)

    @work(thread=True, group="read-once")
    def count_prunable(self: Console, dialog: ConfirmScreen, choice: PruneChoice) -> None:
        try:
            count = control.prune(
                self.reader, choice.states, 0, None, dry_run=True, before=choice.before
            )
        except StoreError as error:
            self.deliver(dialog.dismiss, False)
            self.tell_error(error)
            return
        self.deliver(self.ask_prune, dialog, choice, count)

    def ask_prune(self: Console, dialog: ConfirmScreen, choice: PruneChoice, count: int) -> None:
        if not dialog.is_attached:
            return  # answered no while counting
        names = " or ".join(state.value for state in choice.states)
        if count == 0:
            dialog.dismiss(False)
            self.notify(f"No {names} job finished more than {choice.older_than} ago.")
            return
        noun = "job" if count == 1 else "jobs"
        message = Text(
            f"Removes {count:,} {names} {noun} that finished more than {choice.older_than} "
            "ago, with their attempts and output. "
        )
        message.append("This cannot be undone.", style="bold")
        dialog.ask(f"Prune {count:,} {noun}?", message, f"Prune {count:,}")

    @work(thread=True, group="write")
    def prune_jobs(self: Console, choice: PruneChoice) -> None:
        try:
            removed = control.prune(
                self.writer, choice.states, 0, self.operator, before=choice.before
            )
        except StoreError as error:
            self.tell_error(error)
            return
        noun = "job" if removed == 1 else "jobs"
        self.tell_done(f"Removed {removed:,} finished {noun}.")

    @work(thread=True, group="write")
    def set_queue_paused(self: Console, name: str, paused: bool) -> None:
        try:
            control.set_paused(self.writer, name, paused, self.operator)
        except StoreError as error:
            self.tell_error(error)
            return
        shown = printable(name, single_line=True)
        self.tell_done(f"Queue {shown} {'paused' if paused else 'resumed'}.")
