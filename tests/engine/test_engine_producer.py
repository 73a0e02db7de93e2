"""A pool fed while it runs: a producer committing one job per transaction back to back, and a
long bulk enqueue, take turns with the pool for the write lock instead of starving it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_helpers import Queue, process_alive, wait_until

from queuectl_tui.models import JobState

pytestmark = pytest.mark.slow

GIVE_UP = "database error, retrying"


def test_a_producer_committing_back_to_back_never_makes_the_pool_give_up(
    queue: Queue, tmp_path: Path
) -> None:
    pool = queue.start_pool(count=10)
    jobs = 2000
    producer = [
        sys.executable, "-m", "queuectl_tui.bench.producer",
        queue.location, "fed-", str(jobs), "0", str(tmp_path / "producer.json"),
    ]  # fmt: skip
    subprocess.run(producer, check=True, capture_output=True, timeout=300, env=queue.env)
    queue.wait_all_completed(jobs, timeout=120)
    assert pool.events(GIVE_UP) == []


# A bulk enqueue through the store whose input keeps coming for a while: its transaction, and
# so the write lock, stays open until the marker file is removed.
_SLOW_BULK = """
import pathlib, sys, time
from queuectl_tui.models import JobSpec
from queuectl_tui.store import open_store

marker = pathlib.Path(sys.argv[2])

def batches():
    yield [JobSpec("bulk-1", "true")]
    marker.write_text("holding")
    while marker.exists():
        time.sleep(0.02)
    yield [JobSpec("bulk-2", "true")]

with open_store(sys.argv[1]) as store:
    store.enqueue_batches(batches(), 0, int(time.time() * 1000))
"""


def test_a_long_bulk_enqueue_neither_stops_supervision_nor_makes_the_pool_give_up(
    queue: Queue, tmp_path: Path
) -> None:
    pidfile = tmp_path / "victim.pid"
    queue.enqueue(f"echo $$ > {pidfile}; exec sleep 30", "victim", timeout=1.0, max_retries=0)
    pool = queue.start_pool(count=2)
    pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="victim"))
    marker = tmp_path / "bulk-holding"
    bulk = subprocess.Popen([sys.executable, "-c", _SLOW_BULK, queue.location, str(marker)])
    try:
        wait_until(lambda: marker.exists(), what="the bulk enqueue to hold the write lock")
        wait_until(lambda: not process_alive(pid), timeout=30, what="the timeout to kill it")
        assert bulk.poll() is None and marker.exists(), "the bulk enqueue ended too early"
        time.sleep(1.0)  # the pool has a result to record meanwhile: it waits for its turn
    finally:
        marker.unlink(missing_ok=True)
        bulk.wait(timeout=60)
    assert bulk.returncode == 0
    wait_until(lambda: queue.job("victim").state is JobState.DEAD, what="victim recorded")
    assert queue.job("victim").last_error == "timed out after 1 s"
    queue.wait_all_completed(2, timeout=30)
    assert pool.events(GIVE_UP) == []
