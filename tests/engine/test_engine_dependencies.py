"""Jobs that run after others, run by real pools: a three-stage chain runs in order across two
pool processes, and a pool killed in the middle changes nothing but the timing; a dead parent
cancels what runs after it, and retrying it brings them back."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from engine_helpers import Queue, wait_until

from queuectl_tui.models import JobState

pytestmark = pytest.mark.slow

FAST_RECOVERY = {"stale_worker_timeout": 3, "heartbeat_interval": 0.5, "backoff_base": 1}


def logged(log: Path, pause: float = 0.0) -> str:
    """Appends "<job id> start" then "<job id> done" (with a pause between) to `log`."""
    wait = f"sleep {pause}; " if pause else ""
    return f'echo "$QUEUECTL_JOB_ID start" >> {log}; {wait}echo "$QUEUECTL_JOB_ID done" >> {log}'


def events(log: Path) -> list[tuple[str, str]]:
    return [tuple(line.split()) for line in log.read_text().splitlines()]  # type: ignore[misc]


def first(log: Path, job_id: str, what: str) -> int:
    return events(log).index((job_id, what))


def last(log: Path, job_ids: list[str], what: str) -> int:
    return max(first(log, job_id, what) for job_id in job_ids)


def test_a_chain_runs_in_order_across_pools_and_a_killed_pool_changes_nothing(
    queue: Queue,
) -> None:
    queue.configure(**FAST_RECOVERY)
    log = queue.root / "ran"
    middle = [f"b{n}" for n in range(1, 51)]
    jobs: list[dict[str, object]] = [{"id": "a", "command": logged(log, 0.5)}]
    jobs += [{"id": b, "command": logged(log, 0.3), "after": ["a"]} for b in middle]
    jobs.append({"id": "c", "command": logged(log), "after": middle})
    lines = queue.root / "chain.jsonl"
    lines.write_text("".join(json.dumps(job) + "\n" for job in jobs), encoding="utf-8")
    queue.cli("enqueue", "--file", str(lines))
    assert queue.counts()[JobState.WAITING] == 51

    doomed = queue.start_pool(count=4)
    survivor = queue.start_pool(count=4)
    wait_until(lambda: sum(1 for e in events(log) if e[1] == "done") >= 12, 60, what="b's")
    doomed.signal(signal.SIGKILL)  # in the middle of the b's
    queue.wait_state("c", JobState.COMPLETED, timeout=120)

    for job_id in ["a", *middle, "c"]:
        assert queue.job(job_id).state is JobState.COMPLETED, job_id
    # Each stage starts once the one before it is done, whichever pool ran it.
    assert first(log, "a", "done") < min(first(log, b, "start") for b in middle)
    assert last(log, middle, "done") < first(log, "c", "start")
    assert events(log).count(("c", "start")) == 1
    assert survivor.events("worker lost")  # the killed pool's runs were taken back


def test_a_dead_parent_cancels_its_dependents_and_its_retry_brings_them_back(
    queue: Queue,
) -> None:
    queue.configure(backoff_base=1)
    flag = queue.root / "fixed"
    parent = queue.enqueue(f"test -e {flag}", "parent", max_retries=0)
    log = queue.root / "ran"
    queue.cli("enqueue", json.dumps({"id": "child", "command": logged(log)}), "--after", parent)
    queue.cli(
        "enqueue", json.dumps({"id": "grandchild", "command": logged(log)}), "--after", "child"
    )
    queue.start_pool(count=2)
    queue.wait_state("parent", JobState.DEAD, timeout=30)
    child = queue.wait_state("child", JobState.CANCELLED)
    assert child.last_error == "job 'parent' it runs after ended dead"
    shown = json.loads(queue.cli("show", "grandchild", "--json").stdout)
    assert shown["state"] == "cancelled" and shown["blocked_by"] == "child"
    assert shown["after"] == [{"id": "child", "state": "cancelled", "ended": "cancelled"}]

    refused = queue.cli("retry", "child", check=False)
    assert refused.returncode != 0 and "retry 'parent' first" in refused.stderr

    flag.touch()
    retried = queue.cli("dlq", "retry", "parent")
    assert "parent" in retried.stdout
    queue.wait_state("grandchild", JobState.COMPLETED, timeout=30)
    assert events(log) == [
        ("child", "start"),
        ("child", "done"),
        ("grandchild", "start"),
        ("grandchild", "done"),
    ]


def test_jobs_wait_without_costing_a_pool_anything(queue: Queue) -> None:
    """A thousand waiting jobs are never claimed nor looked at by a pool until their parent
    ends; then they all run."""
    gate = queue.root / "gate"
    queue.enqueue(f"while [ ! -e {gate} ]; do sleep 0.05; done", "gate-job")
    rows = [{"id": f"w{n:04d}", "command": "true", "after": "gate-job"} for n in range(1000)]
    lines = queue.root / "fan.jsonl"
    lines.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    queue.cli("enqueue", "--file", str(lines))
    queue.start_pool(count=4)
    queue.wait_state("gate-job", JobState.PROCESSING)
    assert queue.counts()[JobState.WAITING] == 1000
    gate.touch()
    queue.wait_all_completed(1001, timeout=120)
