"""Where the machine goes while a producer feeds a running pool: the producer's CPU per
enqueue, the pool's per thread, and the whole machine's, per job.

    python scripts/measure_mixed_cpu.py 1000          # a producer paced at 1,000 jobs/s
    python scripts/measure_mixed_cpu.py 0 --jobs 3000 # flat out
    python scripts/measure_mixed_cpu.py 945 --timings # and where the dispatcher's time goes

Prints the enqueue rate, the pool's throughput while the producer ran, the end-to-end p50 and
p95, how busy the cores were, and CPU per job. With --timings, also the dispatcher's wall
clock and CPU per job in its exchanges, in starting commands and inside `posix_spawn` (over the
pool's whole life). Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from queuectl_tui.bench.pool_process import PoolProcess, cpu_seconds, machine_ticks
from queuectl_tui.bench.scenarios import wait_for_completion
from queuectl_tui.models import JobState
from queuectl_tui.store import open_store

TICK = os.sysconf("SC_CLK_TCK")  # /proc/stat counts in these


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds so far of each thread of `pid`."""
    seconds: dict[int, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            seconds[int(tid)] = cpu_seconds(f"{pid}/task/{tid}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rate", type=float, help="enqueues per second; 0: flat out")
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--timings", action="store_true", help="time the dispatcher's calls")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="queuectl-mixed-"))
    producer_env = dict(os.environ)  # the producer runs without the timings' hooks
    if args.timings:
        timings = folder / "timings"
        timings.mkdir()
        os.environ["QUEUECTL_TIMINGS_DIR"] = str(timings)
        paths = [str(Path(__file__).with_name("dispatch_timings")), os.environ.get("PYTHONPATH")]
        os.environ["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
    database = folder / "mixed.db"
    open_store(database).close()
    with (
        PoolProcess(str(database), args.workers, folder / "pool.log") as pool,
        open_store(database) as store,
    ):
        time.sleep(0.5)
        threads_before, machine_before = thread_cpu(pool.pid), machine_ticks()
        out = folder / "producer.json"
        producer = [sys.executable, "-m", "queuectl_tui.bench.producer", str(database), "j"]
        subprocess.run(
            [*producer, str(args.jobs), str(args.rate), str(out)], check=True, env=producer_env
        )
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        threads_after, machine_after = thread_cpu(pool.pid), machine_ticks()
        report = json.loads(out.read_text(encoding="utf-8"))
        seconds = report["ended"] - report["began"]
        wait_for_completion(store, args.jobs, timeout=120)
        newest = store.list_jobs(JobState.COMPLETED, limit=args.jobs, newest_first=True)
        finished = {job.id: (job.finished_at or 0) / 1000 for job in newest}
    during = sum(1 for at in finished.values() if at <= report["ended"])
    latencies = sorted(
        (finished[f"j{n}"] - start) * 1000 for n, start in enumerate(report["starts"])
    )
    total, idle = (a - b for a, b in zip(machine_after, machine_before, strict=True))
    jobs = args.jobs
    print(
        f"enqueue {jobs / seconds:,.0f}/s   pool meanwhile {during / seconds:,.0f} jobs/s   "
        f"p50 {latencies[len(latencies) // 2]:.1f} ms   p95 {latencies[int(0.95 * jobs)]:.1f} ms"
    )
    machine_us = (total - idle) / TICK / jobs * 1e6
    producer_us = (children.ru_utime + children.ru_stime) / jobs * 1e6
    print(
        f"cores busy {(total - idle) / total:.0%}   machine {machine_us:.0f} µs/job   "
        f"producer {producer_us:.0f} µs/job"
    )
    for tid, after in sorted(threads_after.items()):
        spent = after - threads_before.get(tid, 0.0)
        if spent > 0:
            print(f"  pool thread {tid}: {spent / jobs * 1e6:.0f} µs/job")
    if args.timings:
        print_timings(folder / "timings" / f"{pool.pid}.json", jobs)


def print_timings(path: Path, jobs: int) -> None:
    """The dispatcher's calls, per job: "start" includes the posix_spawn calls it made."""
    totals = json.loads(path.read_text(encoding="utf-8"))
    for name, (wall, cpu, calls) in totals.items():
        print(
            f"  {name}: wall {wall / jobs * 1e6:.0f} µs/job, CPU {cpu / jobs * 1e6:.0f} µs/job "
            f"({calls:,} calls)"
        )


if __name__ == "__main__":
    main()
