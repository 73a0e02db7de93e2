"""Where trivial jobs spend the machine: CPU per job and how busy the cores are, for a pool
and for the bare thread pool that `queuectl bench` compares it with, in alternating runs.

    python scripts/measure_cpu_per_job.py                  # 4 rounds of 4,000 `true` jobs
    python scripts/measure_cpu_per_job.py --jobs 2000 --rounds 2 --workers 10

For each run: jobs/s, the CPU the whole machine spent per job (from /proc/stat), the CPU of
the pool process (or of the bare pool's own process) per job, and the share of the cores that
was busy. Linux only.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from queuectl_tui.bench.pool_process import PoolProcess, cpu_seconds, machine_ticks
from queuectl_tui.bench.scenarios import run_bare_pool, wait_for_completion
from queuectl_tui.models import JobSpec
from queuectl_tui.store import open_store
from queuectl_tui.timeutil import now_ms


def report(name: str, jobs: int, seconds: float, ticks: tuple[int, int], own_cpu: float) -> None:
    total, idle = ticks
    tick = os.sysconf("SC_CLK_TCK")
    machine_us = (total - idle) / tick / jobs * 1e6
    print(
        f"{name:5} {jobs / seconds:7,.0f} jobs/s   machine {machine_us:5.0f} µs/job   "
        f"process {own_cpu / jobs * 1e6:4.0f} µs/job   cores busy {(total - idle) / total:4.0%}"
    )


def measure_bare(jobs: int, workers: int) -> None:
    before, own_before = machine_ticks(), time.process_time()
    seconds = run_bare_pool("true", jobs, workers)
    after = machine_ticks()
    ticks = (after[0] - before[0], after[1] - before[1])
    report("bare", jobs, seconds, ticks, time.process_time() - own_before)


def measure_pool(folder: Path, jobs: int, workers: int, round_number: int) -> None:
    database = folder / f"round-{round_number}.db"
    open_store(database).close()
    with (
        PoolProcess(str(database), workers, folder / f"round-{round_number}.log") as pool,
        open_store(database) as store,
    ):
        assert pool.process is not None
        time.sleep(0.5)  # let the pool settle into idle
        before, cpu_before = machine_ticks(), cpu_seconds(pool.process.pid)
        started = time.perf_counter()
        specs = [JobSpec(f"j{n}", "true", 0, None, 0) for n in range(jobs)]
        store.enqueue_many(specs, 0, now_ms())
        wait_for_completion(store, jobs, timeout=120)
        seconds = time.perf_counter() - started
        after, cpu_after = machine_ticks(), cpu_seconds(pool.process.pid)
    ticks = (after[0] - before[0], after[1] - before[1])
    report("pool", jobs, seconds, ticks, cpu_after - cpu_before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--workers", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="queuectl-cpu-") as folder:
        for round_number in range(args.rounds):
            measure_bare(args.jobs, args.workers)
            measure_pool(Path(folder), args.jobs, args.workers, round_number)


if __name__ == "__main__":
    main()
