"""The operations console: jobs by state, workers and dead letters, live, from the keyboard.

Reads happen in thread workers on the console's own reader connection. They start when the
store's change feed says the queue changed (see listen.py), at most every `refresh` seconds
under a stream of changes, and otherwise every few seconds for what moves with time alone;
a read is skipped when `PRAGMA data_version` says nothing changed. Writes go through
`service`, like the CLI's.

Keys act on what the operator sees: each key is handled before the next one is routed, and a
table whose view changed (pane, state, filter, page) is emptied at once until its new rows
land, so nothing acts on rows of the view the operator just left."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult, ScreenStackError
from textual.binding import Binding
from textual.containers import Horizontal
from textual.dom import DOMNode
from textual.message import Message
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Footer, Input, Label, Static, Tab, TabbedContent, TabPane, Tabs

from .. import control, service
from ..config import Settings
from ..display import printable
from ..listen import ChangeListener
from ..models import Job, JobState, QueueInfo, Worker
from ..store import Store, StoreCorrupt, StoreError
from . import actions
from .data import Pane, Snapshot, ViewRequest, read_snapshot
from .job_control import JobControl
from .key_order import KeyOrder
from .marks import Marks
from .operations import QueueOperations
from .schedule_control import ScheduleControl
from .screens.dialog import Dialog
from .screens.error_groups import ErrorGroupsScreen
from .screens.help import HelpScreen, Section
from .screens.job_detail import DetailControls, JobDetailScreen
from .widgets.columns import ColumnTable
from .widgets.dead_table import DeadTable
from .widgets.jobs_table import JobsTable
from .widgets.keyed_table import KeyedTable
from .widgets.queues_table import QueuesTable
from .widgets.schedules_table import SchedulesTable
from .widgets.summary import SummaryBar, SummaryData
from .widgets.workers_table import WorkersTable

Clock = Callable[[], int]

PAGE_SIZE = 100
FULL_READ_EVERY_MS = 10_000  # throughput windows move with time even when nothing is written
THROUGHPUT_EVERY_MS = 5_000  # per-minute rates: reading them at most this often is plenty
FILTER_DELAY = 0.3
QUIET_READ_EVERY = 5.0  # seconds between reads when the change feed reports nothing
# Keys that act on rows: pressed while a changed view's rows are read (a search that scans),
# they wait for those rows (key_order.ROWS_WAIT at most) rather than act on none.
ROW_KEYS = frozenset({"enter", "r", "c", "D", "P", "space", "v", "asterisk"})
STATE_TABS = actions.STATE_TABS
PANE_TITLES = {
    Pane.JOBS: "Jobs",
    Pane.WORKERS: "Workers",
    Pane.DEAD: "Dead letters",
    Pane.QUEUES: "Queues",
    Pane.SCHEDULES: "Schedules",
}
# Actions still allowed while a job's detail is open (modal dialogs allow none).
COUNT_EVERY_S = 5.0  # seconds between counts of a search's matches while it is shown
COUNTED_TABS_WIDTH = 110  # columns from which the state tabs show their counts
DETAIL_ACTIONS = frozenset({"new_job", "help", "quit", "toggle_pause", "start_pool", "stop_pools"})


class QueueChanged(Message):
    """Something committed to the queue (posted from the change listener's thread)."""


def _same_text(a: object, b: Text) -> bool:
    return isinstance(a, Text) and a.plain == b.plain and a.spans == b.spans and a.style == b.style


def _count_key(request: ViewRequest) -> tuple[object, ...]:
    """What a search's count depends on: not the page."""
    return (request.pane, request.job_state, request.queue, request.search)


class QueueConsole(QueueOperations, JobControl, ScheduleControl, Marks, App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "queuectl"
    BINDINGS: ClassVar = [
        *actions.bindings(),
        Binding("enter", "submit_filter", "Apply filter", show=False, priority=True),
    ]
    COMMANDS: ClassVar = App.COMMANDS | {actions.ActionCommands}

    def __init__(
        self,
        settings: Settings,
        *,
        refresh: float = 1.0,
        readonly: bool = False,
        config_path: str | None = None,
        clock: Clock | None = None,
        page_size: int = PAGE_SIZE,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.refresh_seconds = refresh
        self.readonly = readonly
        self.config_path = config_path
        self.page_size = page_size
        self.operator = control.local_operator("console")  # for the audit trail
        self.reader: Store = service.open_queue(settings)
        self.writer: Store = service.open_queue(settings)
        # The store's clock, which heartbeats, run_at and finish times are on; tests fix it.
        self.clock: Clock = clock or self.reader.now
        self.pane = Pane.JOBS
        self.state: JobState | None = None
        self.search = ""
        self.queue_filter: str | None = None  # chosen on the Queues pane with Enter
        self.paused = False
        self._summary_bar = SummaryBar(settings.database, readonly, id="summary")
        self._lines_shown: dict[Static, Text] = {}  # what each status line shows now
        self._tab_labels: dict[str, Text] = {}  # and each tab (state tabs and panes)
        self.anchors: dict[Pane, list[int | None]] = {Pane.JOBS: [None], Pane.DEAD: [None]}
        self._pages_ahead: dict[Pane, int] = {Pane.JOBS: 0, Pane.DEAD: 0}  # ] pressed meanwhile
        self.snapshot: Snapshot | None = None
        self.reads = 0  # snapshots read from the database, for tests and measurements
        self._loading = False
        self._again = False
        self._last_full_read = 0
        self._last_throughput: int | None = None
        self._placement: dict[Pane, str] = {}
        self._shown: dict[Pane, ViewRequest] = {}  # the request whose rows each table shows
        self._more: dict[Pane, bool] = {}  # whether a page follows the one shown
        self._filter_timer: Timer | None = None
        self._next_read_at = 0.0
        self._polled_at = 0.0
        self._held_change: Timer | None = None
        self._listener: ChangeListener | None = None
        self.closing = False
        self.init_marks()
        self.worker_history = False  # the workers pane shows every stored worker
        self._counted: tuple[tuple[object, ...], float] | None = None  # the last search counted
        self._matches: tuple[tuple[object, ...], int] | None = None  # and what it found
        # A damaged database stops the console; the command then reports it (run_dashboard).
        self.fatal: StoreCorrupt | None = None
        self._keys = KeyOrder(self, super().on_event, self._key_target, self._acts_on_rows)

    # -- layout ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield self._summary_bar
        with Horizontal(id="filter-bar"):
            yield Label("Filter ", id="filter-label")
            yield Input(
                placeholder=(
                    'text, state:dead queue:q exit:1 worker:w error:"disk quota" since:10m'
                    " · Enter applies"
                ),
                id="filter",
                compact=True,
            )
        with TabbedContent(id="panes", initial="jobs"):
            with TabPane("Jobs", id="jobs"):
                yield Tabs(*(Tab(name, id=f"state-{name}") for name in STATE_TABS), id="states")
                yield JobsTable(id="jobs-table", marks=self.marks)
                yield Static("", id="jobs-status", classes="status")
            with TabPane("Workers", id="workers"):
                yield WorkersTable(
                    id="workers-table", stale_after_s=self.settings.stale_worker_timeout
                )
                yield Static("", id="workers-status", classes="status")
            with TabPane("Dead letters", id="dead"):
                yield DeadTable(id="dead-table", marks=self.marks)
                yield Static("", id="dead-status", classes="status")
            with TabPane("Queues", id="queues"):
                yield QueuesTable(id="queues-table")
                yield Static("", id="queues-status", classes="status")
            with TabPane("Schedules", id="schedules"):
                yield SchedulesTable(id="schedules-table")
                yield Static("", id="schedules-status", classes="status")
        yield Footer(compact=True)

    def on_resize(self, event: events.Resize) -> None:
        if self.snapshot is not None:
            self.update_tab_labels(self.snapshot)

    def on_mount(self) -> None:
        self.query_one("#filter-bar").display = False
        self.summary.show(SummaryData(self.settings.database), self.clock(), self.paused)
        self.table_for(Pane.JOBS).focus()
        self._listener = ChangeListener(
            lambda: service.open_queue(self.settings),
            self._queue_changed,
            gap=self.refresh_seconds,
        )
        self._listener.start()
        self.set_interval(self.refresh_seconds, self.timed_poll)
        self.set_interval(1.0, self.tick)
        self.poll(force=True)

    def on_unmount(self) -> None:
        self.closing = True
        if self._listener is not None:
            self._listener.stop()
        self.workers.cancel_all()
        self.reader.close()
        self.writer.close()

    # -- keys, one at a time (key_order.py) -------------------------------------------------------
    async def on_event(self, event: events.Event) -> None:
        await self._keys.on_event(event)

    def _key_target(self, event: events.Key) -> DOMNode | None:
        try:
            screen = self.screen
        except ScreenStackError:
            return None  # the console is shutting down
        if isinstance(screen, Dialog) and not screen.takes(event):
            return None  # pressed before the dialog could be read: not an answer to it
        return self.focused or screen

    def _acts_on_rows(self, event: events.Key) -> bool:
        if event.key not in ROW_KEYS:
            return False
        return not isinstance(self.focused, Input) and not isinstance(self.screen, ModalScreen)

    @property
    def keys_pending(self) -> bool:
        """True while a key is being handled, or keys wait for the one before them."""
        return self._keys.pending

    def hold_row_keys(self) -> None:
        """Keys that act on rows wait until `rows_in`: the rows, or the marks, they would act
        on are being read."""
        self._keys.hold_row_keys()

    def rows_in(self) -> None:
        """The rows of the view are shown (or will not come): the keys held for them go on."""
        self._keys.rows_in()

    def focus_now(self, widget: Widget) -> None:
        """Focus `widget` before the next key is routed (Widget.focus waits for queued keys)."""
        widget.screen.set_focus(widget)

    def deliver(self, callback: Callable[..., object], *args: object, **kwargs: object) -> None:
        """Hand a thread worker's result to the UI thread, unless the console is closing."""
        if self.closing:
            return
        with contextlib.suppress(RuntimeError):  # it stopped between the check and the call
            self.call_from_thread(callback, *args, **kwargs)

    def tell_error(self, error: Exception) -> None:
        """From a thread worker: say in one line what failed."""
        self.deliver(self.notify, str(error), severity="error", markup=False)

    def tell_done(self, message: str) -> None:
        """From a thread worker: say what changed, and read the queue again."""
        self.deliver(self.notify, message, markup=False)
        self.deliver(self.poll, True)

    @property
    def live(self) -> bool:
        """False once the console has started to shut down (its widgets may be gone: Textual
        takes a screen's widgets away one by one before it stops the app's timers)."""
        return self.is_running and not self.closing and self._summary_bar.is_attached

    @property
    def reading(self) -> bool:
        """True while a read is in flight or queued to follow the one in flight."""
        return self._loading or self._again

    @property
    def summary(self) -> SummaryBar:
        return self._summary_bar

    def table_for(self, pane: Pane) -> ColumnTable[Any]:
        return self.query_one(f"#{pane.value}-table", ColumnTable)

    # -- reading --------------------------------------------------------------------------------
    def view_request(self) -> ViewRequest:
        pane = self.pane
        if not pane.lists_jobs:
            return ViewRequest(pane, page_size=self.page_size, history=self.worker_history)
        return ViewRequest(
            pane,
            state=self.state if pane is Pane.JOBS else None,
            search=self.search,
            queue=self.queue_filter,
            anchor=self.anchors[pane][-1],
            page_size=self.page_size,
            page=len(self.anchors[pane]),
        )

    def view_changed(self) -> None:
        """The operator asked for other rows: empty the table until they land, and read."""
        pane = self.pane
        if pane.lists_jobs and self._shown.get(pane) != self.view_request():
            self._shown.pop(pane, None)
            self.table_for(pane).blank()
            self.hold_row_keys()
            status = Text("loading…", style="dim")
            self.query_one(f"#{pane.value}-status", Static).update(status)
        self.poll(force=True)

    def _queue_changed(self) -> None:
        self.post_message(QueueChanged())  # thread-safe: this runs in the listener's thread

    def on_queue_changed(self, _message: QueueChanged) -> None:
        # The listener's news may arrive as the console closes, its screens already gone.
        if not self.screen_stack:
            return
        self.poll(changed=True)
        screen = self.screen_stack[-1]
        if isinstance(screen, JobDetailScreen):
            screen.load()

    def _read_held_change(self) -> None:
        self._held_change = None
        self.poll(changed=True)

    def timed_poll(self) -> None:
        """With the change feed listening, only what moves with time needs a timed read."""
        listening = self._listener is not None and self._listener.listening
        if listening and time.monotonic() - self._polled_at < QUIET_READ_EVERY:
            return
        self.poll()

    def poll(self, force: bool = False, changed: bool = False) -> None:
        """Start one background read unless one is running (then read again after it).
        A change the feed told of is never dropped: held back, it is read later."""
        if self.paused and not force:
            return
        wait = self._next_read_at - time.monotonic()
        if not force and wait > 0:
            # The last read was slow (a filter on a huge queue): give the database room.
            if changed and self._held_change is None:
                self._held_change = self.set_timer(wait, self._read_held_change)
            return
        if self._loading:
            self._again = self._again or force or changed
            return
        now = self.clock()
        if now - self._last_full_read >= FULL_READ_EVERY_MS:
            force = True
        last = self.snapshot
        unchanged = last is not None and last.request == self.view_request()
        token = last.token if (last is not None and unchanged and not force) else None
        self._loading = True
        self._polled_at = time.monotonic()
        last_rates = self._last_throughput
        rates = last_rates is None or now - last_rates >= THROUGHPUT_EVERY_MS or now < last_rates
        request = self.view_request()
        # Counting a search's matches may read every job: once per search, then at most
        # every COUNT_EVERY_S while it stays on screen.
        counted = self._counted
        count = bool(request.search) and (
            counted is None
            or counted[0] != _count_key(request)
            or time.monotonic() - counted[1] >= COUNT_EVERY_S
        )
        if count:
            self._counted = (_count_key(request), time.monotonic())
        self.load(request, token, now, rates, count)

    @work(thread=True, group="load")
    def load(
        self,
        request: ViewRequest,
        known_token: int | None,
        now: int,
        rates: bool,
        count: bool = False,
    ) -> None:
        snapshot: Snapshot | None = None
        started = time.monotonic()
        failed = False
        try:
            if self.closing:
                return
            token = self.reader.change_token()
            if token != known_token:
                snapshot = read_snapshot(self.reader, request, now, token, rates, count)
        except StoreError as error:
            failed = True
            if not self.summary_says_lost:  # told once, then the bar says it until a read works
                self.deliver(self.notify, str(error), severity="error", markup=False)
        except StoreCorrupt as error:
            self.deliver(self.stop_on_damage, error)
            return
        except Exception:
            if not self.closing:
                raise
            return  # the store was closed under a read at exit
        self.deliver(self.loaded, snapshot, now, time.monotonic() - started, failed)

    @property
    def summary_says_lost(self) -> bool:
        return self.live and self.summary.lost

    def stop_on_damage(self, error: StoreCorrupt) -> None:
        """Every read of a damaged file fails alike: close rather than show stale panes."""
        self.fatal = error
        self.exit(return_code=1)

    def loaded(
        self, snapshot: Snapshot | None, now: int, took: float = 0.0, failed: bool = False
    ) -> None:
        self._loading = False
        if not self.live:
            return  # a read that finished while the console was shutting down
        if failed != self.summary.lost:
            # The counts shown are the last ones read: the bar says so while reads fail.
            self.summary.lost = failed
            self.summary.redraw()
        # Automatic reads take at most a fifth of the time, however slow a read gets.
        self._next_read_at = time.monotonic() + 4 * took
        if snapshot is not None:
            self.reads += 1
            if now - self._last_full_read >= FULL_READ_EVERY_MS or self._last_full_read == 0:
                self._last_full_read = now
            if snapshot.completed_per_minute is not None:
                self._last_throughput = now
            self.apply(snapshot)
        if self._again:
            self._again = False
            self.poll(force=True)

    # -- rendering ------------------------------------------------------------------------------
    def apply(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        now = self.clock()
        request = snapshot.request
        counts = snapshot.counts
        previous = self.summary.data
        self.summary.show(
            SummaryData(
                self.settings.database,
                dict(counts.by_state),
                counts.active_workers,
                snapshot.completed_per_minute or previous.completed_per_minute,
                snapshot.failed_per_minute or previous.failed_per_minute,
                snapshot.exists,
            ),
            now,
            self.paused,
        )
        self.update_tab_labels(snapshot)
        if request != self.view_request():
            self._again = True  # the operator moved on while this was read
            return
        pane = request.pane
        table = self.table_for(pane)
        if pane.lists_jobs and not snapshot.jobs and request.anchor is not None:
            self.anchors[pane].pop()  # the page emptied under us: back one page
            self._pages_ahead[pane] = 0
            self._again = True
            return
        moved = self._shown.get(pane) != request
        items = snapshot.items
        if isinstance(table, WorkersTable):
            table.running_since = snapshot.running_since
        if moved:
            table.reset()
        table.show(items, now)
        if moved:
            if self._placement.pop(pane, "first") == "last":
                table.select_last()
            else:
                table.select_first()
        self._shown[pane] = request
        if self._keys.rows_due:
            self.call_after_refresh(self.rows_in)
        self._more[pane] = snapshot.more_jobs
        self.update_status(snapshot)
        if pane.lists_jobs and self._pages_ahead[pane]:
            self._pages_ahead[pane] -= 1
            self.action_next_page()  # a ] pressed while this page was loading

    def tick(self) -> None:
        """Once a second: ages, countdowns and heartbeats move on without reading anything."""
        if not self.live:
            return
        now = self.clock()
        self.summary.show(self.summary.data, now, self.paused)
        if self.paused:
            return  # frozen: the rows stay as they were read, ages too
        table = self.table_for(self.pane)
        if self._shown.get(self.pane) is not None:
            table.retime(now)

    def update_tab_labels(self, snapshot: Snapshot) -> None:
        by_state = snapshot.counts.by_state
        tabs = self.query_one("#states", Tabs)
        total = snapshot.counts.total
        # Narrow, the tabs leave their counts to the summary above them, and pad one side
        # only, so that all eight fit in 80 columns.
        counted = self.size.width >= COUNTED_TABS_WIDTH
        tabs.set_class(not counted, "-narrow")
        for index, name in enumerate(STATE_TABS, start=1):
            count = total if name == "all" else by_state.get(JobState(name), 0)
            tab = tabs.query_one(f"#state-{name}", Tab)
            shown = (f" {count:,}", "bold") if counted else ""
            label = Text.assemble((f"{index} ", "dim"), name, shown)
            if not _same_text(self._tab_labels.get(f"state-{name}"), label):  # a layout each
                self._tab_labels[f"state-{name}"] = label
                tab.label = label
        panes = self.query_one("#panes", TabbedContent)
        dead = by_state.get(JobState.DEAD, 0)
        labels = {
            Pane.JOBS: Text.assemble(("j ", "dim"), "Jobs"),
            Pane.WORKERS: Text.assemble(
                ("w ", "dim"), "Workers", (f" {snapshot.counts.active_workers}", "bold")
            ),
            Pane.DEAD: Text.assemble(
                ("d ", "dim"), "Dead letters", (f" {dead:,}", "bold red" if dead else "bold")
            ),
            Pane.QUEUES: Text.assemble(("u ", "dim"), "Queues"),
            Pane.SCHEDULES: Text.assemble(("t ", "dim"), "Schedules"),
        }
        for pane, label in labels.items():
            if not _same_text(self._tab_labels.get(f"pane-{pane.value}"), label):
                self._tab_labels[f"pane-{pane.value}"] = label
                panes.get_tab(pane.value).label = label

    def update_status(self, snapshot: Snapshot) -> None:
        request = snapshot.request
        status = Text(no_wrap=True, overflow="ellipsis")
        if request.pane is Pane.WORKERS:
            active = snapshot.counts.active_workers
            status.append(f"{active} active worker{'s' if active != 1 else ''}", style="bold")
            status.append(
                f" · stale after {self.settings.stale_worker_timeout:g} s without a heartbeat",
                style="dim",
            )
            if request.history:
                status.append(" · every stored worker (h: the last hour's)", style="dim")
            else:
                status.append(" · ended ones of the last hour (h: all)", style="dim")
            status.append(" · Enter opens a worker's job", style="dim")
            if not snapshot.workers:
                status.append(" · no workers yet: press s to start a pool", style="dim")
        elif request.pane is Pane.QUEUES:
            queues = snapshot.queues
            paused = sum(1 for queue in queues if queue.paused)
            status.append(f"{len(queues)} queue{'s' if len(queues) != 1 else ''}", style="bold")
            status.append(f" · {paused} paused", style="bold yellow" if paused else "dim")
            status.append(" · P pauses or resumes the selected queue", style="dim")
        elif request.pane is Pane.SCHEDULES:
            schedules = snapshot.schedules
            paused = sum(1 for view in schedules if view.schedule.paused)
            status.append(f"{len(schedules)} schedule{'s' if len(schedules) != 1 else ''}")
            status.stylize("bold")
            status.append(f" · {paused} paused", style="bold yellow" if paused else "dim")
            status.append(" · P pause/resume · N run now · Enter its last job", style="dim")
            if not schedules:
                status.append(" · add one: queuectl schedule add", style="dim")
        else:
            page = request.page
            shown = len(snapshot.jobs)
            status.append(f"page {page}", style="bold")
            if request.queue is not None:
                status.append(" · queue ", style="dim")
                status.append(printable(request.queue, single_line=True), style="bold")
            if request.search:
                if snapshot.matches is not None:
                    self._matches = (_count_key(request), snapshot.matches)
                known = self._matches
                matches = known[1] if known and known[0] == _count_key(request) else None
                if snapshot.search_error:
                    status.append(" · search: ", style="dim")
                    status.append(snapshot.search_error, style="bold red")
                elif matches == 0 or (matches is None and not shown and page == 1):
                    status.append(" · no matches for ", style="bold yellow")
                    status.append(printable(request.search, single_line=True))
                else:
                    counted = "" if matches is None else f"{matches:,} "
                    status.append(f" · {counted}matching ", style="dim")
                    status.append(printable(request.search, single_line=True))
            else:
                state = request.job_state
                counts = snapshot.queue_counts or snapshot.counts
                total = counts.total if state is None else counts.by_state.get(state, 0)
                first = (page - 1) * self.page_size + 1 if shown else 0
                last = first + shown - 1 if shown else 0
                if page == 1:
                    status.append(f" · {first:,}-{last:,} of {total:,}", style="dim")
                else:
                    status.append(f" · {shown:,} rows", style="dim")
            status.append(" · newest first · ↓ past the end: older · [ ] g pages", style="dim")
            if self.marks:
                marked = Text(f"{len(self.marks):,} marked", style="bold black on cyan")
                marked.append(" r c D act on them, Esc clears ", style="black on cyan")
                status = Text.assemble(marked, " ", status, no_wrap=True, overflow="ellipsis")
        self._update_if_changed(self.query_one(f"#{request.pane.value}-status", Static), status)

    def _update_if_changed(self, widget: Static, text: Text) -> None:
        """Update a line only when what it shows changed: each update lays the screen out."""
        shown = self._lines_shown.get(widget)
        if shown is None or not _same_text(shown, text):
            self._lines_shown[widget] = text
            widget.update(text)

    # -- permissions ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "submit_filter":
            focused = self.focused
            return isinstance(focused, Input) and focused.id == "filter"
        if action not in actions.NAMES:
            return True
        if self.readonly and action in actions.MUTATING:
            return False
        if isinstance(self.screen, ModalScreen):
            return False
        if isinstance(self.screen, (JobDetailScreen, ErrorGroupsScreen)):
            return action in DETAIL_ACTIONS
        if isinstance(self.focused, Input) and action in actions.TYPED:
            return False  # the key is text for the input
        if action in actions.SCHEDULE_ACTIONS:
            return self.pane is Pane.SCHEDULES
        if not self.pane.lists_jobs and action in actions.TABLE_ACTIONS:
            return self.pane is Pane.QUEUES and action in actions.QUEUE_ACTIONS
        if action == "retry_all":  # "all shown": only where dead jobs are what is shown
            return self.view_request().job_state is JobState.DEAD
        if action == "clear_filter":
            shown = bool(self.query_one("#filter-bar").display)
            return bool(self.marks or self.search) or self.queue_filter is not None or shown
        return True

    async def run_command(self, action: str) -> None:
        """Run an action chosen in the command palette, or say why it cannot run here."""
        name = action.split("(", 1)[0]
        if self.check_action(name, ()):
            await self.run_action(action)
        elif name == "retry_all":
            self.notify("Retry all works on dead jobs: open the dead letters (d) first.")
        elif name in actions.SCHEDULE_ACTIONS:
            self.notify("That acts on a schedule: open the schedules pane (t) first.")
        else:
            self.notify("That action is not available here.", severity="warning")

    def refuse_readonly(self) -> bool:
        if self.readonly:
            self.notify("This console is read-only.", severity="warning")
        return self.readonly

    # -- navigation -----------------------------------------------------------------------------
    def action_show_pane(self, name: str) -> None:
        self.query_one("#panes", TabbedContent).active = name
        self.follow_pane()

    @on(TabbedContent.TabActivated, "#panes")
    def pane_activated(self, event: TabbedContent.TabActivated) -> None:
        self.follow_pane()  # a click on a pane's tab

    def follow_pane(self) -> None:
        # Follow the pane that is active now: keys switch panes faster than events arrive.
        pane = Pane(self.query_one("#panes", TabbedContent).active or "jobs")
        if pane is self.pane:
            return
        self.pane = pane
        self.focus_now(self.table_for(pane))
        self.refresh_bindings()
        self.view_changed()

    def action_set_state(self, name: str) -> None:
        self.query_one("#states", Tabs).active = f"state-{name}"
        self.action_show_pane("jobs")
        self.follow_state()

    @on(Tabs.TabActivated, "#states")
    def state_activated(self, event: Tabs.TabActivated) -> None:
        self.follow_state()  # a click on a state tab, or the arrows on the tabs

    def follow_state(self) -> None:
        name = (self.query_one("#states", Tabs).active or "state-all").removeprefix("state-")
        state = None if name == "all" else JobState(name)
        if state is self.state:
            return
        self.state = state
        self.refresh_bindings()
        self.anchors[Pane.JOBS] = [None]
        self._pages_ahead[Pane.JOBS] = 0
        if self.pane is Pane.JOBS:
            self.focus_now(self.table_for(Pane.JOBS))
        self.view_changed()

    def action_next_page(self) -> None:
        pane = self.pane
        if not pane.lists_jobs:
            return
        if self._shown.get(pane) != self.view_request():
            self._pages_ahead[pane] += 1  # taken when the page being read has landed
            return
        table = self.table_for(pane)
        if not self._more.get(pane) or not table.items:
            self._pages_ahead[pane] = 0
            self.notify("This is the last page.", timeout=2)
            return
        self.anchors[pane].append(table.items[-1].seq)
        self._placement[pane] = "first"
        self.view_changed()

    def action_prev_page(self, placement: str = "first") -> None:
        stack = self.anchors.get(self.pane)
        if not stack:
            return
        if self._pages_ahead[self.pane]:
            self._pages_ahead[self.pane] -= 1  # cancels a ] not taken yet
            return
        if len(stack) == 1:
            return
        stack.pop()
        self._placement[self.pane] = placement
        self.view_changed()

    def action_first_page(self) -> None:
        if self.pane.lists_jobs:
            self.anchors[self.pane] = [None]
            self._pages_ahead[self.pane] = 0
            self.view_changed()

    @on(KeyedTable.PageEdge)
    def page_edge(self, event: KeyedTable.PageEdge) -> None:
        if event.direction > 0:
            self.action_next_page()
        else:
            self.action_prev_page(placement="last")

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self.summary.show(self.summary.data, self.clock(), self.paused)
        if not self.paused:
            self.poll(force=True)

    def action_toggle_history(self) -> None:
        self.worker_history = not self.worker_history
        self.poll(force=True)

    def action_refresh_now(self) -> None:
        self.poll(force=True)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.help_sections(), self.readonly))

    def help_sections(self) -> list[Section]:
        sections: dict[str, list[tuple[str, str]]] = {}
        for spec in actions.ACTIONS:
            if self.readonly and spec.mutating:
                continue
            sections.setdefault(spec.section, []).append((spec.shown_key, spec.help))
        sections[actions.GLOBAL].append(("ctrl+p", "Command palette: every action by name"))
        sections[actions.TABLES] += [
            ("↑ ↓ PgUp PgDn", "Move; past the last row loads the next page"),
            ("Tab", "Move between the state tabs, the table and the filter"),
        ]
        detail = [("Esc", "Back to the list"), ("o / a", "Focus the output / the attempts")]
        if not self.readonly:
            detail.append(("r", "Retry this job (when dead)"))
        forms = [("Tab", "Next field"), ("Enter, ctrl+s", "Submit"), ("Esc", "Cancel")]
        confirm = [("Enter", "The focused button (Cancel first)"), ("y / n", "Yes / no")]
        return [
            *sections.items(),
            ("Job detail", detail),
            ("Forms", forms),
            ("Confirmations", confirm),
        ]

    # -- filter ---------------------------------------------------------------------------------
    def action_filter(self) -> None:
        bar = self.query_one("#filter-bar")
        bar.display = True
        self.focus_now(self.query_one("#filter", Input))
        self.refresh_bindings()

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self._filter_timer = self.set_timer(FILTER_DELAY, self.apply_filter)

    def action_submit_filter(self) -> None:
        """Enter in the filter: applied, and the table has the focus for the next key."""
        self.apply_filter()
        self.focus_now(self.table_for(self.pane))

    def apply_filter(self) -> None:
        if self._filter_timer is not None:
            self._filter_timer.stop()
        search = self.query_one("#filter", Input).value.strip()
        if search == self.search:
            return
        self.search = search
        self._restart_paging()

    def _restart_paging(self) -> None:
        """The filter changed: every pane of jobs starts again at its newest page."""
        self.anchors = {Pane.JOBS: [None], Pane.DEAD: [None]}
        self._pages_ahead = {Pane.JOBS: 0, Pane.DEAD: 0}
        self.view_changed()

    def action_clear_filter(self) -> None:
        if self.clear_marks():
            return
        filter_input = self.query_one("#filter", Input)
        filter_input.value = ""
        self.query_one("#filter-bar").display = False
        if self.queue_filter is not None:
            self.queue_filter = None
            self._restart_paging()
        self.apply_filter()
        self.focus_now(self.table_for(self.pane))
        self.refresh_bindings()

    # -- jobs -----------------------------------------------------------------------------------
    def selected_job(self) -> Job | None:
        if not self.pane.lists_jobs:
            return None
        item = self.table_for(self.pane).selected_item()
        return item if isinstance(item, Job) else None

    def action_open_job(self) -> None:
        job = self.selected_job()
        if job is not None:
            self.open_job(job.id)

    @on(KeyedTable.RowSelected)
    def row_selected(self, event: KeyedTable.RowSelected) -> None:
        if event.data_table.id == "queues-table":
            event.stop()
            queue = self.table_for(Pane.QUEUES).selected_item()
            if isinstance(queue, QueueInfo):
                self.show_queue(queue.name)
            return
        if event.data_table.id == "schedules-table":
            event.stop()
            self.action_open_last_job()
            return
        if event.data_table.id == "workers-table":
            event.stop()
            worker = self.table_for(Pane.WORKERS).selected_item()
            if isinstance(worker, Worker) and worker.current_job:
                self.open_job(worker.current_job)
            elif isinstance(worker, Worker):
                self.notify("That worker runs no job now.", severity="warning")
            return
        if event.data_table.id in ("jobs-table", "dead-table"):
            event.stop()
            if self.check_action("open_job", ()):
                self.action_open_job()

    def show_queue(self, name: str) -> None:
        """The jobs pane with this queue's jobs only (Esc shows every queue again)."""
        self.queue_filter = name
        self.action_show_pane("jobs")
        self._restart_paging()
        self.refresh_bindings()

    def action_error_groups(self) -> None:
        retry = None if self.readonly else self.ask_retry_group
        delete = None if self.readonly else self.ask_delete_group
        self.push_screen(
            ErrorGroupsScreen(
                self.reader, self.clock, self.refresh_seconds, retry, delete, self.open_job
            )
        )

    def open_job(self, job_id: str) -> None:
        controls = (
            None
            if self.readonly
            else DetailControls(self.ask_retry, self.ask_cancel, self.ask_about_queue)
        )
        self.push_screen(
            JobDetailScreen(self.reader, job_id, self.clock, self.refresh_seconds, controls)
        )


def run_dashboard(
    settings: Settings,
    refresh: float = 1.0,
    readonly: bool = False,
    config_path: str | None = None,
) -> None:
    """Open the console on the configured database until the operator quits; a damaged
    database closes it and is raised to the caller."""
    console = QueueConsole(settings, refresh=refresh, readonly=readonly, config_path=config_path)
    console.run()
    if console.fatal is not None:
        raise console.fatal


if TYPE_CHECKING:
    from .console_parts import Console

    def _gives_its_parts_what_they_use(console: QueueConsole) -> Console:
        return console  # mypy checks here that QueueConsole satisfies console_parts.Console
