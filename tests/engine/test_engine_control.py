"""An operator's control with real pools: cancel a running job, pause a queue, pools that
serve named queues only."""

from __future__ import annotations

import json
import signal
import time

import pytest
from engine_helpers import Queue, process_alive, wait_until

from queuectl_tui.models import JobState, Outcome

pytestmark = pytest.mark.slow


def test_a_cancelled_running_job_is_stopped_leaves_no_process_and_never_runs_again(
    queue: Queue,
) -> None:
    pidfile = queue.root / "child.pid"
    runs = queue.root / "runs"
    command = f"echo run >> {runs}; sleep 60 & echo $! > {pidfile}; wait"
    job_id = queue.enqueue(command, "long", queue="reports", max_retries=3)
    pool = queue.start_pool(count=1)
    queue.wait_state(job_id, JobState.PROCESSING)
    child = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="child"))
    result = queue.cli("cancel", job_id)
    assert "its pool stops it now" in result.stdout
    job = queue.wait_state(job_id, JobState.CANCELLED, timeout=30)
    assert [a.outcome for a in queue.attempts(job_id)] == [Outcome.CANCELLED]
    assert job.last_error == "cancelled by an operator"
    wait_until(lambda: not process_alive(child), timeout=30, what="the job's child to go")
    # The pool logs the run's end once its exchange has committed it: a moment after the state.
    [cancelled] = wait_until(lambda: pool.events("cancelled"), what="the pool's cancelled line")
    assert cancelled["job"] == job_id
    assert len(pool.events("cancel requested")) == 1  # stopped once, however long it takes
    other = queue.enqueue("true", "after")
    queue.wait_state(other, JobState.COMPLETED, timeout=30)
    assert runs.read_text() == "run\n"  # ran once, never again
    assert queue.job(job_id).state is JobState.CANCELLED
    [entry] = [
        e for e in json.loads(queue.cli("audit", "--json").stdout) if e["action"] == "cancel"
    ]
    assert (entry["face"], entry["subject"], entry["touched"]) == ("cli", job_id, 1)


def test_a_paused_queue_waits_while_other_queues_run_and_a_pool_serves_its_queues(
    queue: Queue,
) -> None:
    queue.cli("queue", "pause", "reports")
    held = queue.enqueue("true", "held", queue="reports")
    free = queue.enqueue("true", "free", queue="emails")
    ignored = queue.enqueue("true", "ignored", queue="other")
    pool = queue.start_pool(count=2, queues=("reports", "emails"))
    queue.wait_state(free, JobState.COMPLETED, timeout=30)
    assert queue.job(held).state is JobState.PENDING
    queue.cli("queue", "resume", "reports")
    queue.wait_state(held, JobState.COMPLETED, timeout=30)
    assert queue.job(ignored).state is JobState.PENDING  # not a queue this pool serves
    assert pool.events("pool started")[0]["queues"] == "reports,emails"


def test_a_running_pool_removes_finished_jobs_and_ended_workers_past_their_keep_time(
    queue: Queue,
) -> None:
    done = [queue.enqueue("true", f"done-{n}") for n in range(3)]
    dead = queue.enqueue("false", "dead", max_retries=0)
    pool = queue.start_pool(count=2)
    for job_id in done:
        queue.wait_state(job_id, JobState.COMPLETED, timeout=30)
    queue.wait_state(dead, JobState.DEAD, timeout=30)
    pool.signal(signal.SIGTERM)
    assert pool.wait() == 0
    ended = {worker.id for worker in queue.workers()}
    # Under a second; dead jobs: kept (the default).
    queue.configure(keep_completed_days=0.00001, keep_workers_days=0.00001)
    time.sleep(1.0)
    pool = queue.start_pool(count=1)
    pruned = pool.wait_event("pruned", timeout=30)
    assert (pruned["completed"], pruned["workers"]) == (3, 2)
    assert queue.counts()[JobState.COMPLETED] == 0
    assert len(ended) == 2 and not ended & {worker.id for worker in queue.workers()}
    assert queue.job(dead).state is JobState.DEAD
    fresh = queue.enqueue("true", "fresh")
    queue.wait_state(fresh, JobState.COMPLETED, timeout=30)  # claims go on


def test_queue_limits_in_the_config_are_set_by_a_starting_pool(queue: Queue) -> None:
    queue.configure(queue_limits="reports=1, emails=3")
    pool = queue.start_pool(count=1)
    assert {e["queue"] for e in pool.events("queue limit set")} == {"reports", "emails"}
    shown = {q["name"]: q for q in json.loads(queue.cli("queue", "list", "--json").stdout)}
    assert shown["reports"]["max_running"] == 1 and shown["emails"]["max_running"] == 3
    audit = json.loads(queue.cli("audit", "--json").stdout)
    assert {(e["face"], e["action"]) for e in audit} == {("config", "limit")}
    second = queue.start_pool(count=1)  # the same limits: nothing set again
    assert second.events("queue limit set") == []


def test_bad_queue_limits_in_the_config_are_refused_in_one_line(queue: Queue) -> None:
    result = queue.cli("config", "set", "queue-limits", "reports=lots", check=False)
    assert result.returncode == 2
    assert "queue-limits: the limit of 'reports' must be 1 to 100,000" in result.stderr


def test_one_pool_stops_gracefully_another_is_forced_and_the_rest_run_on(queue: Queue) -> None:
    gentle = queue.start_pool(count=1, queues=("slow",))
    forced = queue.start_pool(count=1, queues=("stuck",))
    bystander = queue.start_pool(count=1, queues=("other",))
    flag = queue.root / "go"
    queue.enqueue(f"until [ -e {flag} ]; do sleep 0.05; done", "slow-job", queue="slow")
    queue.enqueue("sleep 300", "stuck-job", queue="stuck")
    queue.wait_state("slow-job", JobState.PROCESSING, timeout=30)
    queue.wait_state("stuck-job", JobState.PROCESSING, timeout=30)
    worker_of = {worker.pid: worker for worker in queue.workers()}
    gentle_pool = worker_of[gentle.pid].pool_id

    said = queue.cli("worker", "stop", "--pool", gentle_pool).stdout
    assert said == f"Stop requested for pool {gentle_pool} with 1 worker(s)\n"
    gentle.wait_event("pool stopping", timeout=30)
    assert queue.job("slow-job").state is JobState.PROCESSING  # its job finishes first
    flag.touch()
    assert gentle.wait(timeout=30) == 0
    assert queue.job("slow-job").state is JobState.COMPLETED

    # Named by one of its workers' ids; the job it ran goes back without spending an attempt.
    worker_id = worker_of[forced.pid].id
    said = queue.cli("worker", "stop", "--pool", worker_id, "--force", "--wait").stdout
    assert said.splitlines()[-1] == f"Pool {worker_of[forced.pid].pool_id} stopped"
    forced.wait(timeout=30)
    stuck = queue.job("stuck-job")
    assert (stuck.state, stuck.attempts) == (JobState.PENDING, 0)
    assert [a.outcome for a in queue.attempts("stuck-job")] == [Outcome.INTERRUPTED]

    assert bystander.proc.poll() is None and not bystander.events("pool stopping")
    queue.enqueue("true", "other-job", queue="other")
    queue.wait_state("other-job", JobState.COMPLETED, timeout=30)
    unknown = queue.cli("worker", "stop", "--pool", "no-such-pool", check=False)
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("Error: no running pool 'no-such-pool'")
    assert bystander.proc.poll() is None
    audit = json.loads(queue.cli("audit", "--json").stdout)
    assert [entry["subject"] for entry in audit if entry["action"] == "stop"][:2] == [
        f"pool {worker_of[forced.pid].pool_id} with 1 worker(s), forced",
        f"pool {gentle_pool} with 1 worker(s)",
    ]


def test_a_job_runs_in_its_own_directory_with_its_own_environment(queue: Queue) -> None:
    reports = queue.root / "srv" / "reports"
    reports.mkdir(parents=True)
    queue.enqueue(
        "pwd; echo K=$K; echo ID=$QUEUECTL_JOB_ID",
        "own",
        cwd=str(reports),
        env='{"K": "V"}',
    )
    queue.enqueue("pwd", "nowhere", cwd=str(queue.root / "missing"), max_retries=0)
    pool = queue.start_pool(count=1)
    job = queue.wait_state("own", JobState.COMPLETED, timeout=30)
    [attempt] = queue.attempts("own")
    assert attempt.output == f"{reports}\nK=V\nID=own\n"
    assert job.cwd == str(reports)
    gone = queue.wait_state("nowhere", JobState.DEAD, timeout=30)
    assert (
        gone.last_error == f"the working directory {queue.root / 'missing'} is not a directory here"
    )
    pool.signal(signal.SIGTERM)
    assert pool.wait() == 0
