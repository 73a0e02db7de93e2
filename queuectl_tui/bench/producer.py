"""A producer as users write one: a separate process that enqueues one job per transaction
through the Python API, paced or as fast as it can. Run by the "mixed" benchmark:

    python -m queuectl_tui.bench.producer DATABASE PREFIX JOBS RATE OUT

RATE 0 means flat out. OUT receives JSON: when each enqueue call started (epoch seconds), and
when the first call started and the last returned."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from .. import service
from ..config import Settings
from ..models import JobSpec


def produce(database: str, prefix: str, jobs: int, rate: float) -> dict[str, object]:
    settings = replace(Settings(), database=database)
    starts: list[float] = []
    with service.open_queue(settings) as store:
        began = time.time()
        for number in range(jobs):
            if rate > 0:  # paced on a fixed schedule, so that a slow call is not repeated
                delay = began + number / rate - time.time()
                if delay > 0:
                    time.sleep(delay)
            starts.append(time.time())
            service.enqueue(store, settings, JobSpec(f"{prefix}{number}", "true"))
        ended = time.time()
    return {"began": began, "ended": ended, "starts": starts}


def main(argv: list[str]) -> int:
    database, prefix, jobs, rate, out = argv
    report = produce(database, prefix, int(jobs), float(rate))
    Path(out).write_text(json.dumps(report), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
