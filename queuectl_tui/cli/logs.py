"""`queuectl logs ID [-f]`: a job's output, as it is printed; `queuectl worker logs [-f]`: the
log of the pools started in the background."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TextIO

import typer

from ..display import printable, safe_json
from ..job_output import STEP_PIECES, OutputCursor, OutputStep, read_output
from ..models import Stream
from .context import EXIT_USAGE, fail, guarded, open_store, state
from .jobs import require_utf8_id

# How often a follower looks for more: with the pool writing every 0.3 s, under a second.
FOLLOW_POLL = 0.25
_RED, _DIM, _RESET = "\x1b[31m", "\x1b[2m", "\x1b[0m"


def _colour(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


class _Printer:
    """Pieces to stdout: on a terminal made printable, stderr's in red; into a pipe or a file,
    exactly as stored. Notes (a new attempt, bytes not kept) go to stderr, so that what a pipe
    receives is the output alone."""

    def __init__(self, only: Stream | None, as_json: bool) -> None:
        self.only = only
        self.as_json = as_json
        self.terminal = sys.stdout.isatty()
        self.colour = _colour(sys.stdout)

    def step(self, step: OutputStep, following: bool) -> None:
        if step.started and following and step.run > 1:
            self.note(f"attempt {step.run}")
        if step.skipped:
            self.note(f"{step.skipped} bytes of output not kept (output-limit)")
        out = sys.stdout
        for chunk in step.chunks:
            if self.only is not None and chunk.stream is not self.only:
                continue
            if self.as_json:
                out.write(safe_json({"run": step.run} | chunk.to_dict(), indent=None) + "\n")
                continue
            text = printable(chunk.text) if self.terminal else chunk.text
            if self.colour and chunk.stream is Stream.STDERR:
                text = _RED + text + _RESET
            out.write(text)
        out.flush()

    def note(self, text: str) -> None:
        err = sys.stderr
        if _colour(err):
            text = _DIM + text + _RESET
        err.write(f"[queuectl: {text}]\n")
        err.flush()


@guarded
def logs(
    ctx: typer.Context,
    job_id: str = typer.Argument(..., metavar="ID", help="The job's id."),
    follow: bool = typer.Option(
        False,
        "--follow",
        "-f",
        help="Keep printing as the job prints, through its retries, until it is finished.",
    ),
    stream: str | None = typer.Option(
        None, "--stream", metavar="STREAM", help="Only 'stdout' or only 'stderr'."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="One JSON object per piece: run, seq, stream, text, at."
    ),
) -> None:
    """Print a job's output: of the run under way (as far as it got) or of its last run.

    A running job's output is stored as it is printed (under a second behind); stderr is
    shown in red on a terminal. A job that has not run yet prints nothing (with -f, it is
    waited for).

    Example: queuectl logs job1 -f
    """
    require_utf8_id(job_id)
    only = None
    if stream is not None:
        try:
            only = Stream(stream)
        except ValueError:
            fail("--stream must be 'stdout' or 'stderr'", EXIT_USAGE)
    printer = _Printer(only, as_json)
    cursor = OutputCursor()
    with open_store(ctx) as store:
        while True:
            step = read_output(store, job_id, cursor)
            printer.step(step, follow)
            caught_up = step.ended or step.run == 0 or len(step.chunks) < STEP_PIECES
            if step.finished or (caught_up and not follow):
                return
            if caught_up:
                time.sleep(FOLLOW_POLL)


def _tail_lines(path: Path, lines: int) -> tuple[bytes, int]:
    """The last `lines` lines of the file, and the size it had."""
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        block, data = 65536, b""
        position = size
        while position > 0 and data.count(b"\n") <= lines:
            step = min(block, position)
            position -= step
            handle.seek(position)
            data = handle.read(step) + data
    kept = data.split(b"\n")
    if len(kept) > lines + 1:
        kept = kept[-(lines + 1) :]
    return b"\n".join(kept), size


@guarded
def worker_logs(
    ctx: typer.Context,
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines."),
    lines: int = typer.Option(
        50, "--lines", "-n", min=0, help="Lines from the end to start with (0: none)."
    ),
) -> None:
    """Print the log of the pools started in the background (`worker start --detach`, the
    console's pool): one event per line. A pool in the foreground logs to its terminal.

    Example: queuectl worker logs -f
    """
    from ..engine.detach import log_path_for

    path = log_path_for(state(ctx).settings.database)
    if not path.exists():
        fail(f"no pool log at {path}: no pool was started in the background on this queue")
    data, size = _tail_lines(path, lines) if lines else (b"", path.stat().st_size)
    out = sys.stdout.buffer
    out.write(data)
    out.flush()
    if not follow:
        return
    with path.open("rb") as handle:
        handle.seek(size)
        while True:
            chunk = handle.read(65536)
            if chunk:
                out.write(chunk)
                out.flush()
                continue
            try:
                now = path.stat().st_size
            except FileNotFoundError:
                now = handle.tell()
            if now < handle.tell():  # truncated: start again from its beginning
                handle.seek(0)
            time.sleep(FOLLOW_POLL)


def register(app: typer.Typer, worker_app: typer.Typer) -> None:
    app.command()(logs)
    worker_app.command("logs")(worker_logs)
