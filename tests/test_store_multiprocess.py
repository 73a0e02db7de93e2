"""Claims are atomic across separate OS processes, not just threads, for every backend."""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from pathlib import Path

import pytest
from store_helpers import NOW, register

from queuectl_tui.models import Action, JobState, Worker, WorkerStatus
from queuectl_tui.store import open_store
from queuectl_tui.timeutil import now_ms

from helpers import backend_location, open_backend, spec

JOBS = 2_000
PROCESSES = 4


def _claim_until_empty(location: str, worker: str, start, results) -> None:
    store = open_store(location)
    now = now_ms()
    store.register_workers(
        [Worker(worker, "p", 1, "h", WorkerStatus.IDLE, now, now, None, None, 0, 0)]
    )
    start.wait()
    claimed = []
    while True:
        job = store.claim(worker, 1, now_ms())
        if job is None:
            break
        claimed.append(job.id)
    store.close()
    results.put((worker, claimed))


@pytest.mark.slow
def test_four_processes_claim_each_job_exactly_once(backend: str, tmp_path: Path) -> None:
    location = backend_location(backend, tmp_path)
    store = open_store(location)
    store.enqueue_many([spec(id=f"job-{i}") for i in range(JOBS)], 3, now_ms())
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    results = context.Queue()
    processes = [
        context.Process(target=_claim_until_empty, args=(location, f"w{n}", start, results))
        for n in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    start.set()
    per_worker = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0
    claimed = Counter(job_id for ids in per_worker.values() for job_id in ids)
    assert len(claimed) == JOBS
    assert max(claimed.values()) == 1, "a job was claimed twice"
    assert sum(1 for ids in per_worker.values() if ids) >= 2, "the claims did not interleave"
    assert store.counts()[JobState.PROCESSING] == JOBS
    owners = {job.worker_id for job in store.list_jobs(limit=JOBS)}
    assert owners <= {f"w{n}" for n in range(PROCESSES)}
    store.close()


def test_a_queue_limit_holds_when_stores_claim_at_the_same_moment(
    backend: str, tmp_path: Path
) -> None:
    """Pools claiming from a limited queue at once take turns: a claim that waited for another
    sees what that one took, so the limit holds however the claims interleave."""
    with open_backend(backend, tmp_path) as setup:
        setup.enqueue_many([spec(id=f"r{i}", queue="reports") for i in range(40)], 3, NOW)
        setup.set_queue_limit("reports", 3, NOW, Action("cli", "t", "h", "limit", "reports"))
        register(setup, *(f"w{i}" for i in range(16)))
    stores = [open_backend(backend, tmp_path) for _ in range(8)]
    start = threading.Barrier(len(stores))
    claimed: list[str] = []

    def claim_for(store_index: int) -> None:
        store = stores[store_index]
        start.wait()
        for round_ in range(2):
            worker = f"w{store_index * 2 + round_}"
            job = store.claim(worker, 4242, NOW)
            if job is not None:
                claimed.append(job.id)

    threads = [threading.Thread(target=claim_for, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for store in stores:
        store.close()
    assert len(claimed) == 3
    with open_backend(backend, tmp_path) as check:
        assert check.counts("reports")[JobState.PROCESSING] == 3


def _open_new_queue(location: str, start, results) -> None:
    start.wait()
    try:
        open_store(location).close()
        results.put("opened")
    except Exception as error:  # reported to the test, which names it
        results.put(f"{type(error).__name__}: {error}")


@pytest.mark.slow
@pytest.mark.sqlite_only  # a new file: a server's schema is made under its own lock
def test_processes_opening_a_new_queue_at_one_moment_all_open_it(
    backend: str, tmp_path: Path
) -> None:
    """Pools started together on a queue that does not exist yet: every one of them opens
    it, however their first steps interleave (the switch to WAL mode needs the file to
    itself, and SQLite does not wait for it on its own)."""
    context = multiprocessing.get_context("spawn")
    outcomes: Counter[str] = Counter()
    for attempt in range(12):
        location = backend_location(backend, tmp_path, f"new-{attempt}.db")
        start = context.Barrier(PROCESSES)
        results = context.Queue()
        processes = [
            context.Process(target=_open_new_queue, args=(location, start, results))
            for _ in range(PROCESSES)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=120)
        outcomes.update(results.get(timeout=10) for _ in processes)
        with open_store(location) as store:
            assert store.counts()[JobState.PENDING] == 0
    assert outcomes == Counter({"opened": 12 * PROCESSES})
