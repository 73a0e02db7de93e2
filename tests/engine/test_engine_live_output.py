"""Live output end to end: a pool stores a running job's output as it prints, `queuectl logs`
prints and follows it; on every backend."""

from __future__ import annotations

import subprocess

from engine_helpers import Queue, wait_until

from queuectl_tui.job_output import OutputCursor, read_output
from queuectl_tui.models import JobState, Stream

# Prints a line on each stream, then waits until the test lets it go on.
SLOW = (
    "echo started; echo warming >&2; "
    "while [ ! -e {gate} ]; do sleep 0.05; done; echo done; echo bye >&2"
)


def test_the_output_of_a_running_job_is_stored_as_it_prints(queue: Queue) -> None:
    gate = queue.root / "gate"
    queue.start_pool(count=1)
    job_id = queue.enqueue(SLOW.format(gate=gate), "slow")
    cursor = OutputCursor()
    seen: list[tuple[Stream, str]] = []
    with queue.store() as store:

        def printed_so_far() -> bool:
            step = read_output(store, job_id, cursor)
            seen.extend((chunk.stream, chunk.text) for chunk in step.chunks)
            return len(seen) >= 2

        wait_until(printed_so_far, timeout=20, what="the running job's first lines")
        assert store.get(job_id).state is JobState.PROCESSING  # still running
        assert set(seen) == {(Stream.STDOUT, "started\n"), (Stream.STDERR, "warming\n")}
        gate.touch()
        queue.wait_state(job_id, JobState.COMPLETED, timeout=20)
        step = read_output(store, job_id, cursor)
        assert step.ended and step.finished
        seen.extend((chunk.stream, chunk.text) for chunk in step.chunks)
    assert set(seen[2:]) == {(Stream.STDOUT, "done\n"), (Stream.STDERR, "bye\n")}
    [attempt] = queue.attempts(job_id)
    assert sorted(attempt.output.splitlines()) == ["bye", "done", "started", "warming"]


def test_logs_follow_prints_a_job_until_it_is_finished(queue: Queue) -> None:
    gate = queue.root / "gate"
    queue.start_pool(count=1)
    job_id = queue.enqueue(SLOW.format(gate=gate), "slow")
    follower = subprocess.Popen(
        [*queue.base_command(), "logs", job_id, "--follow", "--stream", "stdout"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=queue.root,
        env=queue.env,
    )
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == "started\n"  # printed while the job runs
        assert queue.job(job_id).state is JobState.PROCESSING
        gate.touch()
        rest, errors = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, errors
    assert rest == "done\n"  # stderr's lines left out
    # Once finished, `logs` prints the stored pieces and returns.
    whole = queue.cli("logs", job_id)
    assert sorted(whole.stdout.splitlines()) == ["bye", "done", "started", "warming"]


def test_a_short_job_writes_no_pieces_and_logs_prints_its_stored_output(queue: Queue) -> None:
    queue.start_pool(count=1)
    job_id = queue.enqueue("echo quick", "quick")
    queue.wait_state(job_id, JobState.COMPLETED)
    with queue.store() as store:
        assert store.output_chunks(job_id, 1) == []
    assert queue.cli("logs", job_id).stdout == "quick\n"
    assert queue.cli("logs", job_id, "--follow", timeout=30).stdout == "quick\n"
    missing = queue.cli("logs", "nope", check=False)
    assert (missing.returncode, missing.stderr.strip()) == (1, "Error: no job with id 'nope'")


def test_merged_streams_keep_the_exact_order_as_stdout(queue: Queue) -> None:
    queue.configure(output_streams="merged")
    gate = queue.root / "gate"
    queue.start_pool(count=1)
    job_id = queue.enqueue(SLOW.format(gate=gate), "slow")
    with queue.store() as store:
        wait_until(lambda: len(store.output_chunks(job_id, 1)) > 0, timeout=20, what="live output")
        gate.touch()
        queue.wait_state(job_id, JobState.COMPLETED, timeout=20)
        chunks = store.output_chunks(job_id, 1)
    assert {chunk.stream for chunk in chunks} == {Stream.STDOUT}
    assert "".join(chunk.text for chunk in chunks) == "started\nwarming\ndone\nbye\n"
    [attempt] = queue.attempts(job_id)
    assert attempt.output == "started\nwarming\ndone\nbye\n"
