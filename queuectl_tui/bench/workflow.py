"""A fan-out and fan-in of jobs that run after others: `root`, then N jobs after it, then
`sink` after all of them, all 'true', run by one pool; beside the same N + 2 jobs with no
links, in the same run, as the baseline.

Reported: the drain time of each and their ratio (what waiting for parents costs a pool), how
long the linked batch took to enqueue against the plain one, and how soon each stage was
released: root's end to its first child's claim (fan-out), the last child's end to the
sink's claim (fan-in), both on the store's clock."""

from __future__ import annotations

import time

from ..models import JobSpec, JobState
from ..store import Store, open_store
from .places import Places
from .pool_process import PoolProcess
from .scenarios import Measure


def measure(places: Places, jobs: int, workers: int) -> list[Measure]:
    plain = _run(places, "workflow_plain", _batch(jobs, linked=False), workers)
    linked = _run(places, "workflow_linked", _batch(jobs, linked=True), workers)
    # The baseline column: the same jobs without links, in this run.
    return [
        Measure(
            f"fan-out/fan-in of {jobs:,}: drain time",
            linked.drain,
            "s",
            baseline=plain.drain,
            target="close to the same jobs without links",
            details={"jobs": jobs + 2, "workers": workers},
        ),
        Measure(
            f"fan-out/fan-in of {jobs:,}: enqueue",
            linked.enqueue * 1000,
            "ms",
            plain.enqueue * 1000,
        ),
        Measure("fan-out release: root's end to a child's claim", linked.fan_out, "ms"),
        Measure("fan-in release: the last child's end to the sink's claim", linked.fan_in, "ms"),
    ]


def _batch(jobs: int, linked: bool) -> list[JobSpec]:
    middle = [f"child-{n:05d}" for n in range(jobs)]
    after_root = ("root",) if linked else ()
    return [
        JobSpec("root", "true"),
        *(JobSpec(job_id, "true", after=after_root) for job_id in middle),
        JobSpec("sink", "true", after=tuple(middle) if linked else ()),
    ]


class _Run:
    def __init__(self, enqueue: float, drain: float, fan_out: float, fan_in: float) -> None:
        self.enqueue = enqueue
        self.drain = drain
        self.fan_out = fan_out
        self.fan_in = fan_in


def _run(places: Places, name: str, specs: list[JobSpec], workers: int) -> _Run:
    database = places.location(name)
    with open_store(database) as store:
        started = time.perf_counter()
        store.enqueue_many(specs, 0, store.now())
        enqueue = time.perf_counter() - started
    total = len(specs)
    with open_store(database) as store:
        began = time.perf_counter()
        with PoolProcess(database, workers, places.folder / f"{name}.log"):
            _wait(store, total)
            drain = time.perf_counter() - began
        return _Run(enqueue, drain, *_releases(store))


def _wait(store: Store, total: int, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while store.counts()[JobState.COMPLETED] < total:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the pool did not complete {total:,} jobs in {timeout:g} s")
        time.sleep(0.02)


def _releases(store: Store) -> tuple[float, float]:
    """(root's end to the first child's claim, the last child's end to the sink's claim), ms."""
    jobs = store.list_jobs(JobState.COMPLETED, limit=1_000_000)
    children = [job for job in jobs if job.id.startswith("child-")]
    root = next(job for job in jobs if job.id == "root")
    sink = next(job for job in jobs if job.id == "sink")
    first_claim = min(job.claimed_at or 0 for job in children)
    last_end = max(job.finished_at or 0 for job in children)
    return (
        float(first_claim - (root.finished_at or first_claim)),
        float((sink.claimed_at or last_end) - last_end),
    )
