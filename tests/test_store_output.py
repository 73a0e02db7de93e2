"""The store contract for live output (append_output, output_chunks) on every backend, and
the reading of a job's output a step at a time (job_output)."""

from __future__ import annotations

import pytest
from store_helpers import NOW, claim, settle

from queuectl_tui.errors import NotFound
from queuectl_tui.job_output import OutputCursor, read_output
from queuectl_tui.models import JobState, Outcome, OutputChunk, Stream
from queuectl_tui.store import OutputAppend, Store

from helpers import spec


def pieces(*texts: str, first: int = 0, offset: int = 0) -> list[OutputChunk]:
    found = []
    for seq, text in enumerate(texts, start=first):
        stream = Stream.STDERR if text.startswith("E") else Stream.STDOUT
        found.append(OutputChunk(seq, stream, text, NOW + seq, offset))
        offset += len(text.encode())
    return found


def append(store: Store, job, chunks: list[OutputChunk], keep_from: int = 0, run=None) -> None:
    run = job.runs if run is None else run
    store.append_output([OutputAppend(job.id, run, job.worker_id, chunks, keep_from)])


def test_pieces_of_a_running_job_are_kept_in_order_with_their_stream(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    job = claim(store)
    append(store, job, pieces("one\n", "Eoops\n"))
    append(store, job, pieces("two\n", first=2, offset=10))
    got = store.output_chunks("a", job.runs)
    assert [(c.seq, c.stream, c.text, c.byte_offset) for c in got] == [
        (0, Stream.STDOUT, "one\n", 0),
        (1, Stream.STDERR, "Eoops\n", 4),
        (2, Stream.STDOUT, "two\n", 10),
    ]
    assert [c.seq for c in store.output_chunks("a", job.runs, after_seq=0, limit=1)] == [1]
    assert store.output_chunks("missing", 1) == []


def test_output_of_a_run_that_is_no_longer_the_workers_is_dropped(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    job = claim(store)
    store.append_output([OutputAppend("a", job.runs, "another-worker", pieces("x"), 0)])
    append(store, job, pieces("stale"), run=job.runs + 1)
    assert store.output_chunks("a", job.runs) == []
    assert store.output_chunks("a", job.runs + 1) == []
    append(store, job, pieces("mine"))
    settle(store, job)
    append(store, job, pieces("late", first=1))  # the run is over: fenced out
    assert [c.text for c in store.output_chunks("a", job.runs)] == ["mine"]


def test_pieces_past_the_limit_and_runs_before_the_previous_are_forgotten(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=5), 3, NOW)
    runs = []
    for number in range(3):
        job = claim(store, now=NOW + 10_000 * number)
        append(store, job, pieces(f"run{job.runs}-a", f"run{job.runs}-b"))
        runs.append(job.runs)
        settle(store, job, outcome=Outcome.FAILED, exit_code=1, now=NOW + 10_000 * number + 1)
        store.retry([job.id], NOW + 10_000 * number + 2, None)
    # The latest run and the one before it are kept; the first is gone.
    assert store.output_chunks("a", runs[0]) == []
    assert [c.text for c in store.output_chunks("a", runs[1])] == ["run2-a", "run2-b"]
    job = claim(store, now=NOW + 100_000)
    append(store, job, pieces("p0", "p1", "p2"))
    append(store, job, pieces("p3", first=3), keep_from=2)
    assert [c.text for c in store.output_chunks("a", job.runs)] == ["p2", "p3"]


def test_deleting_a_job_deletes_its_output(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    job = claim(store)
    append(store, job, pieces("one"))
    settle(store, job)
    assert store.delete(["a"], NOW + 5000, None) == ["a"]
    store.enqueue(spec(id="a"), 3, NOW + 6000)  # a new job of the same id has none of it
    assert store.output_chunks("a", 1) == []


def test_reading_a_job_follows_its_run_and_then_its_stored_output(store: Store) -> None:
    store.enqueue(spec(id="a", max_retries=1), 3, NOW)
    cursor = OutputCursor()
    step = read_output(store, "a", cursor)
    assert (step.run, step.chunks, step.ended, step.finished) == (0, [], False, False)
    job = claim(store)
    append(store, job, pieces("one\n", "Etwo\n"))
    step = read_output(store, "a", cursor)
    assert step.started and step.text == "one\nEtwo\n" and not step.ended
    assert read_output(store, "a", cursor).chunks == []  # caught up
    append(store, job, pieces("three\n", first=2, offset=9))
    settle(store, job, outcome=Outcome.FAILED, exit_code=1, output="whole stored output")
    step = read_output(store, "a", cursor)
    assert step.text == "three\n" and step.ended and not step.finished  # a retry will come
    # The second run ends before going live: its stored output is its one piece.
    job = claim(store, now=NOW + 60_000)
    step = read_output(store, "a", cursor)
    assert step.started and step.run == job.runs and step.chunks == []
    settle(store, job, outcome=Outcome.FAILED, exit_code=2, output="short\n", now=NOW + 61_000)
    step = read_output(store, "a", cursor)
    assert step.text == "short\n" and step.ended and step.finished
    assert store.get("a").state is JobState.DEAD
    # A fresh reader of the finished job starts at its last run.
    step = read_output(store, "a", OutputCursor())
    assert step.text == "short\n" and step.finished


def test_a_reader_is_told_what_went_by_unkept(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    job = claim(store)
    append(store, job, pieces("kept\n", first=7, offset=1000), keep_from=7)
    step = read_output(store, "a", OutputCursor())
    assert step.skipped == 1000 and step.text == "kept\n"


def test_reading_a_missing_job_says_so(store: Store) -> None:
    with pytest.raises(NotFound, match="no job with id 'nope'"):
        read_output(store, "nope", OutputCursor())


def test_a_cancelled_job_that_never_ran_is_finished_for_a_reader(store: Store) -> None:
    store.enqueue(spec(id="a"), 3, NOW)
    store.cancel(["a"], NOW + 1, None)
    step = read_output(store, "a", OutputCursor())
    assert step.run == 0 and step.finished
