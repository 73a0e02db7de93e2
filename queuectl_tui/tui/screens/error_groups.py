"""Error groups: dead jobs grouped by how they failed (error_groups.py), largest first, read
again as the queue changes. r retries a group and D deletes it (each asks first, with the
count); Enter opens the group's latest job."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ... import service
from ...error_groups import ErrorGroup
from ...errors import QueueError
from ...models import JobState
from ...store import Store
from ...timeutil import rough_age
from .. import format as fmt

GroupAction = Callable[[ErrorGroup], None]


class ErrorGroupsScreen(Screen[None]):
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("r", "retry", "Retry group"),
        Binding("D", "delete", "Delete group"),
        Binding("enter", "open", "Open latest", show=False),
    ]

    def __init__(
        self,
        store: Store,
        clock: Callable[[], int],
        refresh_seconds: float,
        retry: GroupAction | None,
        delete: GroupAction | None,
        open_job: Callable[[str], None],
    ) -> None:
        super().__init__()
        self.store = store
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self.retry, self.delete, self.open_job = retry, delete, open_job
        self.groups: list[ErrorGroup] = []
        self._token: int | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("Error groups of the dead letters", style="bold"), id="detail-title")
        yield Static(Text("Loading…", style="dim"), id="groups-status")
        yield DataTable(id="groups", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#groups", DataTable)
        for label, width in (("JOBS", 7), ("LAST", 8), ("FIRST", 8)):
            table.add_column(label, width=width, key=label.lower())
        table.add_column("EXAMPLE", key="example")  # as wide as its ids: whole
        table.add_column("FAILURE", key="failure")
        self.load(force=True)
        self.set_interval(self.refresh_seconds, self.load)
        table.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "retry":
            return self.retry is not None and bool(self.groups)
        if action == "delete":
            return self.delete is not None and bool(self.groups)
        return True

    @work(thread=True, exclusive=True, group="groups")
    def load(self, force: bool = False) -> None:
        try:
            token = self.store.change_token()
            if token == self._token and not force:
                return
            groups = service.error_groups(self.store, JobState.DEAD)
        except QueueError as error:
            self.deliver(self.notify, str(error), severity="error", markup=False)
            return
        self.deliver(self.show, token, groups)

    def deliver(self, callback: Callable[..., object], *args: object, **kwargs: object) -> None:
        with contextlib.suppress(RuntimeError):
            self.app.call_from_thread(callback, *args, **kwargs)

    def show(self, token: int, groups: list[ErrorGroup]) -> None:
        if not self.is_attached:
            return
        self._token = token
        self.groups = groups
        table = self.query_one("#groups", DataTable)
        selected = self.selected()
        table.clear()
        now = self.clock()
        for group in groups:
            table.add_row(
                Text(f"{group.count:,}", style="bold red", justify="right"),
                Text(rough_age(group.last_at, now) if group.last_at else "", style="dim"),
                Text(rough_age(group.first_at, now) if group.first_at else "", style="dim"),
                fmt.plain(group.example),
                fmt.plain(group.fingerprint),
                key=group.fingerprint,
            )
        if selected is not None and selected.fingerprint in {g.fingerprint for g in groups}:
            keys = [g.fingerprint for g in groups]
            table.move_cursor(row=keys.index(selected.fingerprint), animate=False)
        jobs = sum(group.count for group in groups)
        status = Text(f"{len(groups)} group{'s' * (len(groups) != 1)}", style="bold")
        status.append(f" · {jobs:,} dead jobs · largest first", style="dim")
        if not groups:
            status = Text("No dead jobs.", style="dim")
        self.query_one("#groups-status", Static).update(status)
        self.refresh_bindings()

    def selected(self) -> ErrorGroup | None:
        table = self.query_one("#groups", DataTable)
        if not self.groups or not 0 <= table.cursor_row < len(self.groups):
            return None
        return self.groups[table.cursor_row]

    def action_back(self) -> None:
        self.dismiss(None)

    def action_retry(self) -> None:
        group = self.selected()
        if group is not None and self.retry is not None:
            self.retry(group)

    def action_delete(self) -> None:
        group = self.selected()
        if group is not None and self.delete is not None:
            self.delete(group)

    def action_open(self) -> None:
        group = self.selected()
        if group is not None:
            self.open_job(group.example)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()
