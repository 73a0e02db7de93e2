"""Rich rendering for humans. Every untrusted string goes in as rich.text.Text, never markup."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..display import last_line, printable
from ..models import Attempt, Job, JobState, QueueCounts, Worker
from ..store import QueueStats
from ..timeutil import human_age, human_seconds, now_ms, to_iso_seconds

STATE_STYLES: dict[JobState, str] = {
    JobState.PENDING: "cyan",
    JobState.PROCESSING: "yellow",
    JobState.COMPLETED: "green",
    JobState.FAILED: "magenta",
    JobState.DEAD: "red",
}


def console() -> Console:
    # rich honours NO_COLOR itself; a pipe gets plain text at a generous width.
    width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "200"))
    return Console(highlight=False, width=width)


def plain(value: object) -> Text:
    return Text(printable(str(value), single_line=True) if value is not None else "")


def state_text(state: JobState) -> Text:
    return Text(state.value, style=STATE_STYLES.get(state, ""))


def _when(ms: int | None) -> str:
    return to_iso_seconds(ms)


def next_run(job: Job, now: int) -> str:
    if job.state not in (JobState.PENDING, JobState.FAILED):
        return ""
    if job.run_at <= now:
        return "now"
    return "in " + human_seconds((job.run_at - now + 999) / 1000)


def jobs_table(jobs: Sequence[Job], width: int) -> Table:
    """Jobs as a table that fits `width`: narrow terminals drop the UPDATED and EXIT columns
    before anything else, and an id folds onto more lines rather than being cut."""
    now = now_ms()
    wide = width >= 110
    table = Table(header_style="bold")
    longest = max((len(job.id) for job in jobs), default=2)
    table.add_column("ID", min_width=min(longest, 36 if wide else 20), overflow="fold")
    table.add_column("STATE", no_wrap=True)
    table.add_column("PRI", justify="right", no_wrap=True)
    table.add_column("TRIES", justify="right", no_wrap=True)
    table.add_column("NEXT RUN", no_wrap=True)
    if wide:
        table.add_column("UPDATED (UTC)", no_wrap=True)
        table.add_column("EXIT", justify="right", no_wrap=True)
    table.add_column("COMMAND", overflow="ellipsis", no_wrap=True, ratio=1, min_width=8)
    for job in jobs:
        cells: list[Text | str] = [
            plain(job.id),
            state_text(job.state),
            str(job.priority),
            f"{job.attempts}/{job.max_retries + 1}",
            next_run(job, now),
        ]
        if wide:
            cells += [_when(job.updated_at), "" if job.exit_code is None else str(job.exit_code)]
        cells.append(plain(job.command))
        table.add_row(*cells)
    return table


def dead_table(jobs: Sequence[Job]) -> Table:
    table = Table(header_style="bold")
    longest = max((len(job.id) for job in jobs), default=2)
    table.add_column("ID", min_width=min(longest, 36), overflow="fold")
    table.add_column("ATTEMPTS", justify="right", no_wrap=True)
    table.add_column("EXIT", justify="right", no_wrap=True)
    table.add_column("DIED (UTC)", no_wrap=True)
    table.add_column("LAST ERROR", overflow="ellipsis", no_wrap=True, ratio=1)
    table.add_column("COMMAND", overflow="ellipsis", no_wrap=True, ratio=1)
    for job in jobs:
        table.add_row(
            plain(job.id),
            str(job.runs),
            "" if job.exit_code is None else str(job.exit_code),
            _when(job.updated_at),
            Text(last_line(job.last_error)),
            plain(job.command),
        )
    return table


def counts_table(counts: QueueCounts) -> Table:
    table = Table(header_style="bold", show_header=True)
    table.add_column("STATE")
    table.add_column("JOBS", justify="right")
    for state, count in counts.by_state.items():
        table.add_row(state_text(state), str(count))
    table.add_row(Text("total", style="bold"), Text(str(counts.total), style="bold"))
    table.add_row("active workers", str(counts.active_workers))
    return table


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


def stats_tables(stats: QueueStats) -> list[Table]:
    summary = Table(title="Activity", header_style="bold")
    summary.add_column("MEASURE")
    summary.add_column("VALUE", justify="right")
    summary.add_row("completed, last minute", str(stats.completed_last_minute))
    summary.add_row("failed attempts, last minute", str(stats.failed_last_minute))
    summary.add_row("attempts, all time", str(stats.attempts_total))
    summary.add_row("failed attempts, all time", str(stats.attempts_failed))
    summary.add_row("retries run, all time", str(stats.retries))
    latency = Table(title=f"Latency (last {stats.sample_size} attempts)", header_style="bold")
    latency.add_column("")
    for column in ("AVG", "P50", "P95"):
        latency.add_column(column, justify="right")
    for label, values in (("queue wait", stats.wait_ms), ("run time", stats.run_ms)):
        latency.add_row(label, *(_ms(values.get(key)) for key in ("avg", "p50", "p95")))
    return [counts_table(stats.counts), summary, latency]


def workers_table(workers: Sequence[Worker], stale_after_s: float) -> Table:
    now = now_ms()
    table = Table(header_style="bold")
    longest = max((len(w.id) for w in workers), default=2)
    table.add_column("ID", no_wrap=True, min_width=longest)
    for column in ("PID", "HOST", "STATUS", "STARTED (UTC)", "HEARTBEAT", "JOB", "DONE", "FAILED"):
        justify = "right" if column in ("PID", "DONE", "FAILED") else "left"
        table.add_column(column, justify=justify, no_wrap=column != "JOB")
    for worker in workers:
        stale = worker.is_stale(now, stale_after_s)
        beat = Text(
            human_age(worker.last_heartbeat, now) + " ago", style="bold red" if stale else ""
        )
        table.add_row(
            plain(worker.id),
            str(worker.pid),
            plain(worker.host),
            Text(worker.status.value + (" (stale)" if stale else "")),
            _when(worker.started_at),
            beat,
            plain(worker.current_job or ""),
            str(worker.jobs_done),
            str(worker.jobs_failed),
        )
    return table


def job_detail(job: Job, attempts: Sequence[Attempt], out: Console) -> None:
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column()
    for key, value in job.to_dict().items():
        if key == "state":
            fields.add_row(key, state_text(job.state))
        else:
            fields.add_row(key, plain("" if value is None else value))
    out.print(fields)
    if not attempts:
        out.print(Text("\nNo attempts yet."))
        return
    history = Table(title="Attempts", header_style="bold")
    for column in ("#", "WORKER", "STARTED (UTC)", "DURATION", "EXIT", "OUTCOME", "ERROR"):
        history.add_column(column, no_wrap=column != "ERROR")
    for attempt in attempts:
        history.add_row(
            str(attempt.number),
            plain(attempt.worker_id or ""),
            _when(attempt.started_at),
            _ms(attempt.finished_at - attempt.started_at),
            "" if attempt.exit_code is None else str(attempt.exit_code),
            attempt.outcome.value,
            Text(last_line(attempt.error)),
        )
    out.print(history)
    latest = attempts[-1]
    out.print(Text(f"\nOutput of attempt {latest.number}:", style="bold"))
    out.print(Text(printable(latest.output) or "(no output)"))
