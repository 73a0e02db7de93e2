"""A queue with a long history, for measuring what must not grow with it (`stats`).

Running a million jobs through a pool would take many minutes: the store writes the history
straight in (store/seeding.py)."""

from __future__ import annotations

from os import PathLike, fspath

from ..models import JobSpec
from ..store import open_store, seeding

BATCH = 100_000


def enqueue_jobs(location: str | PathLike[str], jobs: int, prefix: str = "j") -> None:
    with open_store(fspath(location)) as store:
        for start in range(0, jobs, BATCH):
            count = min(BATCH, jobs - start)
            store.enqueue_many(
                [
                    JobSpec(f"{prefix}{n}", f"echo {n}", n % 5, None, 0)
                    for n in range(start, start + count)
                ],
                0,
                store.now(),
            )


def complete_all(where: str | PathLike[str]) -> None:
    """Give every job one completed attempt, finished over the last hour."""
    seeding.complete_all(fspath(where))
