"""Time the store's metrics() and `queuectl metrics` on a queue with a long history.

    python scripts/measure_metrics.py /tmp/history.db [--jobs 1000000]

Builds the queue if the file does not exist (every job completed once, written with SQL; see
queuectl_tui/bench/history.py), then prints the median and range of many calls of
Store.metrics, of rendering the Prometheus text and of the `queuectl metrics` command."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from measure_stats import timed  # this folder is on the path of a script run from it

from queuectl_tui import metrics
from queuectl_tui.bench.history import complete_all, enqueue_jobs
from queuectl_tui.store import open_store
from queuectl_tui.timeutil import now_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database", type=Path)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    args = parser.parse_args()
    if not args.database.exists():
        enqueue_jobs(args.database, args.jobs)
        complete_all(args.database)
    with open_store(args.database) as store:
        snapshot = store.metrics(now_ms())
        print(f"attempts: {snapshot.run_time.count:,}")
        print("Store.metrics():", timed(lambda: store.metrics(now_ms()), 200))
        print("prometheus_text():", timed(lambda: metrics.prometheus_text(snapshot), 200))
    command = [sys.executable, "-m", "queuectl_tui", "--db", str(args.database), "metrics"]
    for flags in ([], ["--json"]):
        argv = [*command, *flags]
        print(
            " ".join(["queuectl metrics", *flags]) + ":",
            timed(lambda: subprocess.run(argv, check=True, capture_output=True), 15),  # noqa: B023
        )


if __name__ == "__main__":
    main()
