"""One job: every field, the attempt history, and the output of the highlighted attempt,
followed as it is printed while the attempt runs (End follows, Home goes to the top). Follows
the job live; a running job shows its elapsed time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ...display import last_line, printable
from ...errors import QueueError
from ...job_output import STEP_PIECES, OutputCursor, OutputStep, read_output
from ...models import (
    FINISHED_STATES,
    Attempt,
    Job,
    JobLink,
    JobLinks,
    JobState,
    masked_environment,
)
from ...store import Store, StoreCorrupt, StoreError
from ...timeutil import human_seconds
from .. import format as fmt
from ..widgets.output_log import OutputLog

RUNNING = "running"  # the row key of the attempt in progress
# How often the output of a running attempt is looked for: with the pool writing every
# 0.3 s, what is printed shows within a second.
OUTPUT_POLL = 0.25


def _duration(attempt: Attempt) -> str:
    ms = max(0, attempt.finished_at - attempt.started_at)
    return f"{ms} ms" if ms < 10_000 else human_seconds(ms / 1000)


def _outcome_style(attempt: Attempt) -> str:
    return "green" if attempt.outcome.value == "completed" else "red"


LINKS_SHOWN = 12  # jobs that run after the one shown, named in its detail at most


def linked_text(jobs: Sequence[JobLink], more: bool = False) -> Text:
    """Jobs a job runs after, or that run after it: each id with its state (coloured)."""
    shown = Text()
    for n, link in enumerate(jobs):
        if n:
            shown.append(", ")
        shown.append_text(fmt.plain(link.id))
        shown.append(" ")
        shown.append_text(fmt.state_text(link.state) if link.state else Text("deleted", "dim"))
    if more:
        shown.append(", …", style="dim")
    return shown


def fields_table(job: Job, now: int, links: JobLinks | None = None) -> Group:
    """The job's fields: two pairs per row, long texts on rows of their own; the jobs it runs
    after and those that run after it."""
    grid = Table.grid(padding=(0, 1), expand=True)
    grid.add_column(style="bold", no_wrap=True, min_width=11)
    grid.add_column(ratio=1)
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(ratio=1)
    state = fmt.state_text(job.state)
    running = fmt.elapsed(job, now)
    if running:
        state.append(f"  running for {running}", style="bold yellow")
    grid.add_row("id", fmt.plain(job.id), "state", state)
    grid.add_row("queue", fmt.plain(job.queue), "type", fmt.plain(job.job_type or ""))
    wait = fmt.next_run(job, now)
    run_at = Text(fmt.timestamp(job.run_at))
    if wait.plain:
        run_at.append("  ")
        run_at.append_text(wait)
    grid.add_row("priority", str(job.priority), "run at", run_at)
    tries = f"{job.attempts} of {job.max_retries + 1} ({job.runs} runs in all)"
    grid.add_row("attempts", tries, "created", fmt.timestamp(job.created_at))
    timeout = "config job-timeout" if job.timeout is None else f"{job.timeout:g} s"
    grid.add_row("timeout", timeout, "updated", fmt.timestamp(job.updated_at))
    worker = fmt.plain(job.worker_id or "")
    if job.worker_pid:
        worker.append(f" (pid {job.worker_pid})")
    grid.add_row("worker", worker, "claimed", fmt.timestamp(job.claimed_at))
    exit_code = Text("" if job.exit_code is None else str(job.exit_code))
    grid.add_row("exit code", exit_code, "finished", fmt.timestamp(job.finished_at))
    wide = Table.grid(padding=(0, 1), expand=True)
    wide.add_column(style="bold", no_wrap=True, min_width=11)
    wide.add_column(ratio=1)
    wide.add_row("command", Text(printable(job.command, single_line=True)))
    if job.idempotency_key:
        wide.add_row("idempotency", fmt.plain(job.idempotency_key))
    if job.cwd:
        wide.add_row("directory", fmt.plain(job.cwd))
    if job.env:  # secret-looking values masked
        shown = " ".join(f"{k}={v}" for k, v in masked_environment(job.environment).items())
        wide.add_row("environment", fmt.plain(shown))
    if job.last_error:
        wide.add_row("last error", Text(last_line(job.last_error), style="red"))
    if links is not None and links.parents:
        label = "after (any end)" if job.after_any_end else "after"
        wide.add_row(label, linked_text(links.parents))
    if links is not None and links.children:
        more = len(links.children) > LINKS_SHOWN
        wide.add_row("dependents", linked_text(links.children[:LINKS_SHOWN], more))
    return Group(grid, wide)


@dataclass(frozen=True, slots=True)
class DetailControls:
    """What the detail may do to its job, through the console's own asking actions."""

    retry: Callable[[Job], None]
    cancel: Callable[[Job], None]
    pause_queue: Callable[[str], object]  # pause or resume the job's queue (asks first)


class JobDetailScreen(Screen[None]):
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("r", "retry", "Retry job"),
        Binding("c", "cancel", "Cancel job"),
        Binding("P", "pause_queue", "Pause queue", show=False),
        Binding("o", "focus_output", "Output"),
        Binding("end", "follow", "Follow", priority=True),
        Binding("home", "output_top", "Top", show=False, priority=True),
        Binding("a", "focus_attempts", "Attempts", show=False),
    ]

    def __init__(
        self,
        store: Store,
        job_id: str,
        clock: Callable[[], int],
        refresh_seconds: float,
        controls: DetailControls | None,
    ) -> None:
        super().__init__()
        self.store = store
        self.job_id = job_id
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self.controls = controls  # None: read-only
        self.job: Job | None = None
        self.attempts: list[Attempt] = []
        self.links = JobLinks()
        self._token: int | None = None
        self._shown_attempt: int | None = None
        self._cursor: OutputCursor | None = None  # of the attempt whose output is shown

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Job {printable(self.job_id, single_line=True)}"), id="detail-title")
        yield Static(Text("Loading…", style="dim"), id="detail-fields")
        yield Static(Text("Attempts", style="bold"), classes="section")
        yield DataTable(id="attempts", cursor_type="row", zebra_stripes=True)
        yield Static(Text("Output", style="bold"), id="output-title", classes="section")
        yield OutputLog(id="output")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#attempts", DataTable)
        for label, width in (
            ("#", 4),
            ("WORKER", None),  # as wide as its worker ids: whole
            ("STARTED", 20),
            ("TOOK", 9),
            ("EXIT", 5),
            ("OUTCOME", 10),
            ("ERROR", 20),
        ):
            table.add_column(label, width=width, key=label.lower())
        self.load(force=True)
        self.set_interval(self.refresh_seconds, self.load)
        self.set_interval(1.0, self.tick)
        self.set_interval(OUTPUT_POLL, self.poll_output)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        job = self.job
        if action in ("retry", "cancel", "pause_queue"):
            if self.controls is None or job is None:
                return False
            if action == "retry":
                return job.state is JobState.DEAD
            if action == "cancel":
                return job.state not in FINISHED_STATES
        return True

    @work(thread=True, exclusive=True, group="detail")
    def load(self, force: bool = False) -> None:
        try:
            token = self.store.change_token()
            if token == self._token and not force:
                return
            job = self.store.get(self.job_id)
            attempts = self.store.attempts(self.job_id)
            links = self.store.job_links(self.job_id, LINKS_SHOWN + 1)
        except StoreError as error:
            self.deliver(self.notify, str(error), severity="error", markup=False)
            return
        except StoreCorrupt as error:
            stop = getattr(self.app, "stop_on_damage", None)
            if stop is not None:
                self.deliver(stop, error)
            return
        self.deliver(self.show, token, job, attempts, links)

    def deliver(self, callback: Callable[..., object], *args: object, **kwargs: object) -> None:
        """Hand a read to the UI thread, unless the console stopped meanwhile."""
        with contextlib.suppress(RuntimeError):
            self.app.call_from_thread(callback, *args, **kwargs)

    def show(self, token: int, job: Job | None, attempts: list[Attempt], links: JobLinks) -> None:
        if not self.is_attached:
            return  # closed while the read was in flight
        self._token = token
        if job is None:
            self.query_one("#detail-fields", Static).update(
                Text("This job no longer exists.", style="red")
            )
            return
        self.job = job
        self.attempts = attempts
        self.links = links
        self.tick()
        table = self.query_one("#attempts", DataTable)
        was_running = self.drop_running_row(table)
        shown = {str(key.value) for key in table.rows}
        for attempt in attempts:
            key = str(attempt.number)
            if key in shown:  # attempts never change once recorded
                continue
            table.add_row(
                Text(str(attempt.number)),
                fmt.plain(attempt.worker_id or ""),
                Text(fmt.timestamp(attempt.started_at)),
                Text(_duration(attempt)),
                fmt.exit_text(attempt.exit_code),
                Text(attempt.outcome.value, style=_outcome_style(attempt)),
                Text(last_line(attempt.error)),
                key=key,
            )
        running = self.add_running_row(table, job)
        if was_running and not running and attempts:
            self._shown_attempt = None  # the attempt on show has ended: show how
        if running and self._shown_attempt is None:
            table.move_cursor(row=table.row_count - 1, animate=False)
            self.show_running(job)
        elif attempts and self._shown_attempt is None:
            table.move_cursor(row=len(attempts) - 1, animate=False)
            self.show_output(attempts[-1])
        elif not attempts and not running and self._cursor is None:
            log = self.query_one("#output", OutputLog)
            log.reset()
            log.end("No attempts yet.")
        self.refresh_bindings()

    def tick(self) -> None:
        if self.job is not None:
            fields = fields_table(self.job, self.clock(), self.links)
            self.query_one("#detail-fields", Static).update(fields)
            table = self.query_one("#attempts", DataTable)
            if RUNNING in table.rows:
                table.update_cell(RUNNING, "took", Text(fmt.elapsed(self.job, self.clock())))

    def drop_running_row(self, table: DataTable[Text]) -> bool:
        """Remove the row of the attempt in progress (re-added, last, while it runs)."""
        if RUNNING not in table.rows:
            return False
        table.remove_row(RUNNING)
        return True

    def add_running_row(self, table: DataTable[Text], job: Job) -> bool:
        """A processing job's current attempt is part of its history, as a running row."""
        if job.state is not JobState.PROCESSING or any(
            attempt.number == job.runs for attempt in self.attempts
        ):
            return False
        table.add_row(
            Text(str(job.runs)),
            fmt.plain(job.worker_id or ""),
            Text(fmt.timestamp(job.claimed_at)),
            Text(fmt.elapsed(job, self.clock())),
            Text(""),
            Text(RUNNING, style="bold yellow"),
            Text(""),
            key=RUNNING,
        )
        return True

    def show_running(self, job: Job) -> None:
        self._shown_attempt = job.runs
        self.show_run(job.runs)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value == RUNNING:
            if self.job is not None:
                self.show_running(self.job)
            return
        number = int(str(event.row_key.value))
        for attempt in self.attempts:
            if attempt.number == number:
                self.show_output(attempt)

    def show_output(self, attempt: Attempt) -> None:
        self._shown_attempt = attempt.number
        self.show_run(attempt.number)

    def show_run(self, run: int) -> None:
        """Show one run's output: a run that is over at once, one under way as it prints. A
        run already on show is left as it is (its output keeps coming, the scroll stays)."""
        self.show_output_title(run)
        if self._cursor is not None and self._cursor.run == run:
            return
        self._cursor = OutputCursor(run=run)
        self.query_one("#output", OutputLog).reset()
        self.read_output(self._cursor)

    def show_output_title(self, run: int) -> None:
        log = self.query_one("#output", OutputLog)
        live = self._cursor is not None and self._cursor.run == run and not self._cursor.ended
        mode = ""
        if live:
            mode = "following (Home: top)" if log.following else "paused (End: follow)"
        self.query_one("#output-title", Static).update(
            Text.assemble(
                ("Output of attempt ", "bold"),
                (str(run), "bold"),
                (f"  {mode}" if mode else "", "bold yellow"),
                ("  (o to focus, ↑↓ PgUp PgDn to scroll)", "dim"),
            )
        )

    def poll_output(self) -> None:
        cursor = self._cursor
        if cursor is not None and not cursor.ended:
            self.read_output(cursor)

    @work(thread=True, exclusive=True, group="output")
    def read_output(self, cursor: OutputCursor) -> None:
        try:
            step = read_output(self.store, self.job_id, cursor)
        except QueueError:
            return  # the next poll tries again; the job's own read reports the trouble
        self.deliver(self.add_output, cursor, step)

    def add_output(self, cursor: OutputCursor, step: OutputStep) -> None:
        if not self.is_attached or cursor is not self._cursor:
            return  # another attempt is on show now
        log = self.query_one("#output", OutputLog)
        log.add(step.chunks, step.skipped)
        if step.ended:
            log.end()
        elif len(step.chunks) == STEP_PIECES:
            self.read_output(cursor)  # more is stored: read on at once
        self.show_output_title(cursor.run)

    def action_back(self) -> None:
        self.dismiss(None)

    def action_retry(self) -> None:
        if self.controls is not None and self.job is not None and self.job.state is JobState.DEAD:
            self.controls.retry(self.job)

    def action_cancel(self) -> None:
        if self.controls is not None and self.job is not None:
            self.controls.cancel(self.job)

    def action_pause_queue(self) -> None:
        if self.controls is not None and self.job is not None:
            self.controls.pause_queue(self.job.queue)

    def action_focus_output(self) -> None:
        self.query_one("#output").focus()

    def action_follow(self) -> None:
        self.query_one("#output", OutputLog).follow()
        if self._cursor is not None:
            self.show_output_title(self._cursor.run)

    def action_output_top(self) -> None:
        self.query_one("#output", OutputLog).top()
        if self._cursor is not None:
            self.show_output_title(self._cursor.run)

    def action_focus_attempts(self) -> None:
        self.query_one("#attempts").focus()
