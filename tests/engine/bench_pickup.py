"""Pickup latency and idle CPU of a worker pool (a benchmark, not a test).

Starts `queuectl worker start` as its own process, measures its CPU use while idle, then
enqueues jobs one at a time from this process and reads from the pool's JSON log when each
was claimed. Latency is measured to the pool's `claimed` event from the moment `enqueue`
returned (the commit is durable), and, as a pessimistic bound, from the moment it was called
(which adds the enqueue's own commit and fsync); both clocks are this host's.

    .venv/bin/python tests/engine/bench_pickup.py --wake auto --workers 4 --jobs 300
    .venv/bin/python tests/engine/bench_pickup.py --wake poll --workers 4 --jobs 300
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from queuectl_tui.models import JobSpec
from queuectl_tui.store import open_store
from queuectl_tui.timeutil import now_ms


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        stat = handle.read()
    fields = stat[stat.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parse_ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def wait_for(log: Path, event: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and f'"event": "{event}"' in log.read_text():
            return
        time.sleep(0.05)
    raise SystemExit(f"the pool did not log {event!r}; see {log}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wake", default="auto", choices=("auto", "inotify", "poll"))
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="queuectl-bench-"))
    database = folder / "queue.db"
    log = folder / "pool.log"
    open_store(database).close()
    env = dict(os.environ, QUEUECTL_WAKE=args.wake)
    command = [sys.executable, "-m", "queuectl_tui", "--db", str(database), "worker", "start"]
    command += ["--count", str(args.workers), "--log-format", "json"]
    with open(log, "wb") as out:
        pool = subprocess.Popen(command, stderr=out, env=env)
    try:
        wait_for(log, "pool started")
        time.sleep(1.0)  # let start-up work settle before measuring idle cost
        cpu0, wall0 = cpu_seconds(pool.pid), time.monotonic()
        time.sleep(args.idle_seconds)
        idle_cpu = (cpu_seconds(pool.pid) - cpu0) / (time.monotonic() - wall0) * 100

        store = open_store(database)
        called: dict[str, float] = {}
        returned: dict[str, float] = {}
        for number in range(args.jobs):
            job_id = f"j{number}"
            called[job_id] = time.time()
            store.enqueue(JobSpec(id=job_id, command="true"), 0, now_ms())
            returned[job_id] = time.time()
            # Give the pool time to go idle again, at an irregular pace.
            time.sleep(random.uniform(0.01, 0.03))
        store.close()
        time.sleep(0.5)
    finally:
        pool.send_signal(2)
        pool.wait(timeout=30)

    claimed: dict[str, float] = {}
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if record.get("event") == "claimed":
            claimed.setdefault(record["job"], parse_ts(record["ts"]))

    def summary(reference: dict[str, float]) -> str:
        values = sorted((claimed[j] - reference[j]) * 1000 for j in reference if j in claimed)

        def pct(q: float) -> float:
            return values[min(len(values) - 1, int(q * len(values)))]

        return (
            f"p50 {statistics.median(values):.2f}  p95 {pct(0.95):.2f}  "
            f"p99 {pct(0.99):.2f}  max {values[-1]:.2f}  min {values[0]:.2f}"
        )

    missing = len(returned) - sum(1 for j in returned if j in claimed)
    wake = next(
        json.loads(line)["wake"]
        for line in log.read_text().splitlines()
        if '"pool started"' in line
    )
    print(f"wake mode: {wake}, workers: {args.workers}, jobs: {args.jobs}, missing: {missing}")
    print(f"idle CPU over {args.idle_seconds:g} s: {idle_cpu:.2f}% of one core")
    print(f"pickup ms after enqueue returned: {summary(returned)}")
    print(f"pickup ms after enqueue called:   {summary(called)}")


if __name__ == "__main__":
    main()
