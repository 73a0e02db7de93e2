"""Run a million jobs through a queue, with and without retention, and report the database
file's size and the claim latency as the history grows.

    python scripts/measure_retention.py /tmp/retention [--jobs 1000000] [--keep 100000]

No processes run: the store's own exchange (settle and claim, ten workers at a time) does
what a pool's dispatcher does, on a clock that moves one millisecond per job. With retention,
completed jobs older than `--keep` jobs' worth of that clock are pruned in batches of 500
every 10,000 jobs, as a pool's retention thread would. Prints the file size (database and
WAL) and the p50/p95 of one exchange, per tenth of the run."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from queuectl_tui.lifecycle import RetryPolicy
from queuectl_tui.models import JobSpec, JobState, Outcome, Worker, WorkerStatus
from queuectl_tui.store import ClaimRequest, Settlement, open_store

WORKERS = [f"w{n}" for n in range(10)]
START = 1_800_000_000_000
BATCH = 10_000


def size_mb(path: Path) -> float:
    total = 0
    for suffix in ("", "-wal"):
        with_suffix = Path(f"{path}{suffix}")
        if with_suffix.exists():
            total += with_suffix.stat().st_size
    return total / 1e6


def run(path: Path, jobs: int, keep: int | None) -> list[str]:
    for suffix in ("", "-wal", "-shm", "-lock"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    lines = []
    policy = RetryPolicy()
    with open_store(path) as store:
        store.register_workers(
            [
                Worker(w, "p", os.getpid(), "h", WorkerStatus.IDLE, START, START, None, None, 0, 0)
                for w in WORKERS
            ]
        )
        done = 0
        held: dict[str, object] = {}
        samples: list[float] = []
        while done < jobs:
            clock = START + done
            store.enqueue_many([JobSpec(f"j{done + n}", "true") for n in range(BATCH)], 0, clock)
            finished = 0
            while finished < BATCH:
                clock = START + done + finished
                settlements = [
                    Settlement(job, Outcome.COMPLETED, 0, "", None, clock)  # type: ignore[arg-type]
                    for job in held.values()
                ]
                started = time.perf_counter()
                request = ClaimRequest(settlements, WORKERS, os.getpid(), clock, policy)
                exchange = store.exchange(request)
                samples.append(time.perf_counter() - started)
                finished += len(settlements)
                held = dict(exchange.claimed)
                if not held and not settlements:
                    break
            done += BATCH
            if keep is not None:
                before = START + done - keep
                while store.prune(JobState.COMPLETED, before, 500) == 500:
                    pass
            if done % (jobs // 10) == 0:
                ordered = sorted(samples)
                p50 = ordered[len(ordered) // 2] * 1000
                p95 = ordered[int(len(ordered) * 0.95)] * 1000
                counts = store.counts()
                lines.append(
                    f"{done:>9,} jobs  file {size_mb(path):7.1f} MB  "
                    f"exchange p50 {p50:.3f} ms p95 {p95:.3f} ms  "
                    f"completed kept {counts[JobState.COMPLETED]:,}"
                )
                print(lines[-1], flush=True)
                samples = []
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--keep", type=int, default=100_000)
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    print("without retention")
    run(args.folder / "keep-all.db", args.jobs, None)
    print(f"with retention (completed jobs kept for {args.keep:,} jobs' worth of time)")
    run(args.folder / "retention.db", args.jobs, args.keep)


if __name__ == "__main__":
    main()
