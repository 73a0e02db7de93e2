"""The console's actions on schedules (the Schedules pane): pause or resume the selected one,
make one job of it now, open its last job. Each goes through the same schedule_ops function
as its CLI twin, in a thread worker on the console's writer connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work

from .. import schedule_ops
from ..display import printable
from ..errors import NotFound
from ..presentation import countdown
from ..store import StoreError
from .data import Pane

if TYPE_CHECKING:
    from .console_parts import Console


class ScheduleControl:
    """Mixed into QueueConsole: each method's `self` is a console_parts.Console."""

    def selected_schedule(self: Console) -> schedule_ops.ScheduleView | None:
        if self.pane is not Pane.SCHEDULES:
            return None
        item = self.table_for(Pane.SCHEDULES).selected_item()
        return item if isinstance(item, schedule_ops.ScheduleView) else None

    def schedule_to_change(self: Console) -> schedule_ops.ScheduleView | None:
        """The selected schedule, for an action that changes it (None, said, if there is
        none or the console is read-only)."""
        if self.refuse_readonly():
            return None
        view = self.selected_schedule()
        if view is None:
            self.notify("Select a schedule first.", severity="warning")
        return view

    def action_toggle_schedule(self: Console) -> None:
        view = self.schedule_to_change()
        if view is not None:
            self.set_schedule_paused(view.name, not view.schedule.paused)

    @work(thread=True, group="write")
    def set_schedule_paused(self: Console, name: str, paused: bool) -> None:
        call = schedule_ops.pause_schedule if paused else schedule_ops.resume_schedule
        try:
            view = call(self.writer, name, self.operator)
        except (StoreError, NotFound) as error:
            self.tell_error(error)
            return
        shown = printable(name, single_line=True)
        if paused:
            self.tell_done(f"Schedule {shown} paused: it makes no job until resumed (P).")
        else:
            when = countdown(view.schedule.next_at, self.clock())
            self.tell_done(f"Schedule {shown} resumed; its next job comes {when}.")

    def action_run_schedule(self: Console) -> None:
        view = self.schedule_to_change()
        if view is not None:
            self.run_schedule_now(view.name)

    @work(thread=True, group="write")
    def run_schedule_now(self: Console, name: str) -> None:
        try:
            job = schedule_ops.run_schedule(self.writer, self.settings, name, self.operator)
        except (StoreError, NotFound) as error:
            self.tell_error(error)
            return
        shown = printable(name, single_line=True)
        self.tell_done(f"Enqueued job {printable(job.id, True)} from schedule {shown}.")

    def action_open_last_job(self: Console) -> None:
        view = self.selected_schedule()
        if view is None:
            return
        if view.schedule.last_job_id is None:
            self.notify("That schedule has made no job yet.", severity="warning")
            return
        self.open_job(view.schedule.last_job_id)
