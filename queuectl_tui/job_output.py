"""A job's output as it is printed, read a step at a time from a cursor: what `queuectl logs`,
the console's job detail, the web page and the HTTP API show and follow.

A step reads the job first and its pieces second. The pool writes a run's last pieces before
its result, so a step that finds the run over has every piece of it. A run that ended before
its output went live (most short jobs) has no pieces: its stored output is its one piece.
Following goes from run to run until the job is finished (completed, dead or cancelled).
"""

from __future__ import annotations

from dataclasses import dataclass

from .models import FINISHED_STATES, Job, JobState, OutputChunk, Stream
from .service import get_job
from .store import Store

# Pieces read per step; a step that reads this many leaves the rest to the next one.
STEP_PIECES = 500


@dataclass(slots=True)
class OutputCursor:
    """Where a reader is: the run it reads (0: the job's latest, once it has one), the last
    piece it has, the byte just past what it saw, and whether it saw the run end."""

    run: int = 0
    seq: int = -1
    next_byte: int = 0
    ended: bool = False


@dataclass(frozen=True, slots=True)
class OutputStep:
    job: Job
    run: int  # the run these pieces are of (0: the job has not run yet)
    chunks: list[OutputChunk]  # new pieces of that run, in order
    skipped: int  # bytes that went by unseen before them (only the newest are kept)
    started: bool  # this step is the first of the run
    ended: bool  # the run is over and every piece of it was read

    @property
    def finished(self) -> bool:
        """Nothing more will come: the job is done, and the run read (if it ran) is its last
        and was read to its end."""
        done = self.job.state in FINISHED_STATES and self.run == self.job.runs
        return done and (self.ended or self.run == 0)

    @property
    def text(self) -> str:
        return "".join(chunk.text for chunk in self.chunks)


def read_output(store: Store, job_id: str, cursor: OutputCursor) -> OutputStep:
    """The next step of a job's output after `cursor`, which it moves on."""
    job = get_job(store, job_id)  # NotFoundError if there is none
    started = False
    if cursor.run == 0 and job.runs > 0:
        cursor.run, started = job.runs, True
    elif cursor.ended and job.runs > cursor.run:
        # The next run, not the latest: a follower sees each (or its stored output).
        cursor.run, cursor.seq, cursor.next_byte, cursor.ended = cursor.run + 1, -1, 0, False
        started = True
    run = cursor.run
    if run == 0 or cursor.ended:
        return OutputStep(job, run, [], 0, started, cursor.ended)
    running = job.state is JobState.PROCESSING and job.runs == run
    chunks = store.output_chunks(job_id, run, cursor.seq, STEP_PIECES)
    if not chunks and cursor.seq == -1 and not running:
        chunks = _stored_output(store, job_id, run)
    skipped = 0
    if chunks:
        skipped = max(0, chunks[0].byte_offset - cursor.next_byte)
        last = chunks[-1]
        cursor.seq = last.seq
        cursor.next_byte = last.byte_offset + len(last.text.encode())
    cursor.ended = not running and len(chunks) < STEP_PIECES
    return OutputStep(job, run, chunks, skipped, started, cursor.ended)


def _stored_output(store: Store, job_id: str, run: int) -> list[OutputChunk]:
    """A finished run without live pieces: its attempt's stored output, as one piece."""
    for attempt in reversed(store.attempts(job_id)):
        if attempt.number == run:
            if not attempt.output:
                return []
            return [OutputChunk(2**31, Stream.STDOUT, attempt.output, attempt.finished_at, 0)]
    return []
