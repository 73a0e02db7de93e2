"""Marks: rows of the jobs and dead letter panes an operator picks (one by one, a range, or
every job the view's filter matches, over every page), and the actions that then act on
exactly those ids: retry, cancel, delete. Each asks first, stating the count, and goes
through the same `control` call as its CLI twin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work

from .. import control
from ..errors import InvalidInput
from ..store import StoreError
from .data import Pane
from .screens.confirm import ConfirmScreen

if TYPE_CHECKING:
    from .console_parts import Console

# Marks kept at most: every matching job of a huge queue is a delete by filter's job (CLI).
MAX_MARKS = 100_000


def _jobs(count: int) -> str:
    return f"{count:,} job{'s' if count != 1 else ''}"


class Marks:
    """Mixed into QueueConsole: each method's `self` is a console_parts.Console."""

    marks: dict[str, None]  # the marked ids, in the order they were marked
    _mark_anchor: str | None  # the row marked last: a range runs from it

    def init_marks(self) -> None:
        self.marks = {}
        self._mark_anchor = None

    def marks_changed(self: Console) -> None:
        for pane in (Pane.JOBS, Pane.DEAD):
            table = self.table_for(pane)
            table.show(table.items, self.clock())
        if self.snapshot is not None:
            self.update_status(self.snapshot)
        self.refresh_bindings()

    def action_toggle_mark(self: Console) -> None:
        job = self.selected_job()
        if job is None:
            return
        if job.id in self.marks:
            del self.marks[job.id]
        else:
            self.marks[job.id] = None
        self._mark_anchor = job.id
        self.marks_changed()
        self.table_for(self.pane).action_cursor_down()

    def action_mark_range(self: Console) -> None:
        """Mark every row from the one marked last to the selected one (this page)."""
        table = self.table_for(self.pane)
        job = self.selected_job()
        keys = table.keys
        if job is None:
            return
        start = keys.index(self._mark_anchor) if self._mark_anchor in keys else keys.index(job.id)
        end = keys.index(job.id)
        low, high = sorted((start, end))
        for key in keys[low : high + 1]:
            self.marks[key] = None
        self._mark_anchor = job.id
        self.marks_changed()

    def action_mark_matching(self: Console) -> None:
        """Mark every job the view shows, over every page: its state tab, queue and filter."""
        if self.pane.lists_jobs:
            self.hold_row_keys()  # `* D` deletes what `*` marks, never the selected row
            self.mark_matching()

    @work(thread=True, exclusive=True, group="marks")
    def mark_matching(self: Console) -> None:
        request = self.view_request()
        try:
            ids = control.matching_ids(
                self.reader, request.job_state, request.queue, request.search or None
            )
        except (StoreError, InvalidInput) as error:
            self.tell_error(error)
            self.deliver(self.rows_in)
            return
        self.deliver(self.take_marks, ids)

    def take_marks(self: Console, ids: list[str]) -> None:
        if len(ids) > MAX_MARKS:
            self.notify(
                f"{len(ids):,} jobs match; marks stop at {MAX_MARKS:,}. For more, act by "
                "filter from the CLI (queuectl cancel/retry/delete --search ...).",
                severity="warning",
            )
            ids = ids[:MAX_MARKS]
        for job_id in ids:
            self.marks[job_id] = None
        self.notify(f"{_jobs(len(self.marks))} marked.")
        self.marks_changed()
        self.rows_in()  # the keys held for the marks go on

    def clear_marks(self: Console) -> bool:
        """Forget the marks; False when there were none."""
        if not self.marks:
            return False
        self.marks.clear()
        self._mark_anchor = None
        self.marks_changed()
        return True

    # -- acting on the marked jobs ----------------------------------------------------------
    def ask_about_marked(self: Console, what: str) -> None:
        """Retry, cancel or delete exactly the marked jobs, after saying how many."""
        ids = list(self.marks)
        count = f"the {len(ids):,} marked job{'s' if len(ids) != 1 else ''}"
        if what == "retry":
            title = f"Retry {count}?"
            message = Text(
                "Dead and cancelled ones go back to pending with a fresh retry budget, failed "
                "ones run now; the others are left as they are."
            )
            label = "Retry"
        elif what == "cancel":
            title = f"Cancel {count}?"
            message = Text(
                "Waiting ones end cancelled at once; running ones are stopped by their pools; "
                "finished ones are left as they are."
            )
            label = "Cancel jobs"
        else:
            title = f"Delete {count}?"
            message = Text("They go with their attempts and output; running ones are left. ")
            message.append("This cannot be undone.", style="bold")
            label = "Delete"

        def answered(yes: bool | None) -> None:
            if yes:
                self.act_on_marked(what, ids)

        back = "Keep them" if what == "cancel" else "Back"
        self.push_screen(ConfirmScreen(title, message, label, back_label=back), answered)

    @work(thread=True, group="write")
    def act_on_marked(self: Console, what: str, ids: list[str]) -> None:
        calls = {
            "retry": control.retry_jobs,
            "cancel": control.cancel_jobs,
            "delete": control.delete_jobs,
        }
        try:
            report = calls[what](self.writer, ids, self.operator)
        except StoreError as error:
            self.tell_error(error)
            return
        done = len(report.done) + len(report.pending_stop)
        verb = {"retry": "Retried", "cancel": "Cancelled", "delete": "Deleted"}[what]
        message = f"{verb} {done:,} of the {_jobs(len(ids))} marked"
        if report.pending_stop:
            message += f" ({len(report.pending_stop):,} being stopped by their pools)"
        left = len(report.unchanged) + len(report.missing)
        if left:
            message += f"; {left:,} left as they were"
        self.deliver(self.clear_marks)
        self.tell_done(message + ".")
