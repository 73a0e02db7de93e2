"""The Python API: a program feeds and watches the queue with the CLI's rules."""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from queuectl_tui import Queue
from queuectl_tui.errors import InvalidInput, NotFound
from queuectl_tui.models import JobState
from queuectl_tui.store import open_store

from helpers import clean_env, wait_until


def test_a_job_enqueued_from_python_is_stored_durably(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with Queue(db) as queue:
        job = queue.enqueue("echo hi", id="a", priority=5, max_retries=1, timeout=9)
        assert (job.id, job.state, job.priority, job.max_retries, job.timeout) == (
            "a",
            JobState.PENDING,
            5,
            1,
            9.0,
        )
        generated = queue.enqueue("true")
        assert len(generated.id) == 16
    with Queue(db) as again:
        assert again.get("a").command == "echo hi"
        assert again.status().by_state[JobState.PENDING] == 2


def test_refused_input_names_its_field_and_writes_nothing(tmp_path: Path) -> None:
    with Queue(tmp_path / "q.db") as queue:
        with pytest.raises(InvalidInput) as refused:
            queue.enqueue("true", priority=2**31)
        assert refused.value.field == "priority"
        with pytest.raises(InvalidInput) as empty:
            queue.enqueue("   ")
        assert empty.value.field == "command"
        assert queue.list() == []
    assert not (tmp_path / "q.db").exists()  # a refused job does not even create the file


def test_a_known_idempotency_key_returns_the_job_it_made(tmp_path: Path) -> None:
    with Queue(tmp_path / "q.db") as queue:
        first = queue.enqueue("true", idempotency_key="k")
        assert queue.enqueue("echo other", idempotency_key="k").id == first.id
        assert len(queue.list()) == 1


def test_run_at_takes_a_datetime_and_a_naive_one_is_utc(tmp_path: Path) -> None:
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with Queue(tmp_path / "q.db") as queue:
        aware = queue.enqueue("true", run_at=later)
        naive = queue.enqueue("true", run_at=later.replace(tzinfo=None))
        text = queue.enqueue("true", run_at=later.isoformat())
    expected = int(later.timestamp() * 1000)
    for job in (aware, naive, text):
        assert abs(job.run_at - expected) <= 1


def test_many_jobs_go_in_all_together_or_not_at_all(tmp_path: Path) -> None:
    with Queue(tmp_path / "q.db") as queue:
        jobs: list[dict[str, object]] = [
            {"id": "a", "command": "true"},
            {"id": "b", "command": "true", "timeout": -1},
        ]
        with pytest.raises(InvalidInput, match=r"^job 2: ") as refused:
            queue.enqueue_many(jobs)
        assert refused.value.field == "timeout"
        assert queue.list() == []
        result = queue.enqueue_many([{"id": "a", "command": "true"}, {"command": "echo b"}])
        assert result.created == 2
        assert queue.list(state="pending")[0].id == "a"


def test_lists_page_by_seq_and_refuse_unknown_states(tmp_path: Path) -> None:
    with Queue(tmp_path / "q.db") as queue:
        for number in range(5):
            queue.enqueue("true", id=f"j{number}")
        first = queue.list(limit=2)
        second = queue.list(limit=2, after_seq=first[-1].seq)
        assert [job.id for job in first + second] == ["j0", "j1", "j2", "j3"]
        assert [job.id for job in queue.list(JobState.PENDING, newest_first=True, limit=1)] == [
            "j4"
        ]
        with pytest.raises(InvalidInput, match="unknown state 'done'"):
            queue.list("done")
        with pytest.raises(NotFound):
            queue.get("nope")


def test_a_dead_job_is_retried_from_python_after_a_pool_ran_it(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with Queue(db) as queue:
        queue.enqueue("exit 3", id="bad", max_retries=0)
        pool = subprocess.Popen(
            [sys.executable, "-m", "queuectl_tui", "--db", str(db), "worker", "start"],
            env=clean_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_until(
                lambda: queue.get("bad").state is JobState.DEAD, timeout=60, what="the job to die"
            )
        finally:
            pool.send_signal(signal.SIGTERM)
            pool.wait(timeout=60)
        [attempt] = queue.attempts("bad")
        assert attempt.exit_code == 3
        outcome = queue.retry("bad", "nope")
        assert (outcome.retried, outcome.unknown) == (["bad"], ["nope"])
        assert queue.get("bad").state is JobState.PENDING
        assert queue.stats().attempts_total == 1


def test_importing_the_package_does_not_load_the_api() -> None:
    script = "import sys, queuectl_tui; print('queuectl_tui.api' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.stdout.strip() == "False"


def test_a_program_controls_jobs_and_queues_and_is_in_the_audit_trail(tmp_path: Path) -> None:
    with Queue(tmp_path / "q.db") as queue:
        queue.enqueue("true", id="a", queue="reports")
        queue.enqueue("true", id="b")
        queue.pause("reports")
        [reports] = [info for info in queue.queues() if info.name == "reports"]
        assert reports.paused and reports.waiting == 1
        assert queue.cancel("a", "ghost").missing == ["ghost"]
        assert queue.get("a").state is JobState.CANCELLED
        assert queue.delete("a").done == ["a"]
        queue.resume("reports")
        assert [job.id for job in queue.list()] == ["b"]
    with open_store(str(tmp_path / "q.db")) as store:
        actions = [(entry.face, entry.action) for entry in store.actions()]
    assert actions == [("api", "resume"), ("api", "delete"), ("api", "cancel"), ("api", "pause")]


def test_a_program_stops_a_pool_it_names(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with Queue(db) as queue:
        pool = subprocess.Popen(
            [sys.executable, "-m", "queuectl_tui", "--db", str(db), "worker", "start", "-c", "2"],
            env=clean_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            workers = wait_until(lambda: queue.workers(), timeout=60, what="the pool to start")
            with pytest.raises(NotFound, match="no running pool 'nope'"):
                queue.stop_pools("nope")
            asked = queue.stop_pools(workers[0].id)
            assert sorted(w.id for w in asked) == sorted(w.id for w in workers)
            assert pool.wait(timeout=60) == 0
        finally:
            if pool.poll() is None:
                pool.kill()
                pool.wait()
