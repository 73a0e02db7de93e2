"""What a claim costs, and how fast a pool drains, as the backlog grows: the same queue
loaded with more and more due jobs (and, in one variant, with higher-priority jobs scheduled
for later on top), its planner statistics gathered as autovacuum would, then measured.

Claim cost is the store's own exchange for a pool of `workers`, each round settling the
jobs the previous one claimed, in this process; the drain rate is a real pool's jobs/s over
a stretch of the backlog, after its first claims."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from ..lifecycle import RetryPolicy
from ..models import Job, JobSpec, JobState, Outcome, Worker, WorkerStatus
from ..store import Store, StoreOptions, open_store, seeding
from ..store.base import ClaimRequest, Settlement
from .places import Places
from .pool_process import PoolProcess
from .scenarios import Measure, wait_for_completion

BATCH = 100_000
HOUR_MS = 3_600_000
# Exchanges timed for the claim cost (each takes `workers` jobs off the backlog); then jobs a
# pool runs before its drain is timed (start-up and the first claims), and jobs timed. All
# three fit in the smallest backlog measured (2,000).
CLAIM_ROUNDS = 30
DRAIN_WARMUP = 100
DRAIN_TIMED = 1_500


@dataclass(frozen=True, slots=True)
class Backlog:
    """A load: `due` jobs due now, and `later` jobs of a higher priority due in an hour."""

    due: int
    later: int = 0

    @property
    def label(self) -> str:
        text = f"{self.due:,} due"
        return f"{text} + {self.later:,} higher-priority later" if self.later else text


def measure(places: Places, backlogs: list[Backlog], workers: int) -> list[Measure]:
    """Claim cost and drain rate on each backlog, each against the first (the smallest)."""
    costs: list[tuple[Backlog, float, float]] = []
    for backlog in backlogs:
        location = places.location(f"backlog_{backlog.due}_{backlog.later}")
        load(location, backlog)
        cost = claim_cost(location, workers, CLAIM_ROUNDS)
        costs.append((backlog, cost, drain_rate(places, location, workers)))
    smallest_cost, smallest_rate = costs[0][1], costs[0][2]
    results: list[Measure] = []
    for backlog, cost, rate in costs:
        details: dict[str, float | int | str] = {"due": backlog.due, "later": backlog.later}
        claim = f"claim cost (one exchange, {workers} settled + {workers} claimed)"
        results += [
            Measure(
                f"{claim}, {backlog.label}",
                cost,
                "ms",
                smallest_cost,
                "<= 1 ms",
                {**details, "exchanges": CLAIM_ROUNDS},
            ),
            Measure(
                f"drain rate, {workers} workers, {backlog.label}",
                rate,
                "jobs/s",
                smallest_rate,
                ">= 0.7x the smallest backlog",
                {**details, "timed_jobs": DRAIN_TIMED},
            ),
        ]
    return results


def load(location: str, backlog: Backlog) -> None:
    """Enqueue the backlog in bulk, then gather the planner's statistics."""
    with open_store(location) as store:
        now = store.now()
        _enqueue(store, "due-", backlog.due, priority=0, run_at=now - 1_000)
        _enqueue(store, "later-", backlog.later, priority=5, run_at=now + HOUR_MS)
    analyze(location)


def _enqueue(store: Store, prefix: str, jobs: int, priority: int, run_at: int) -> None:
    for start in range(0, jobs, BATCH):
        count = min(BATCH, jobs - start)
        specs = [
            JobSpec(f"{prefix}{n}", "true", priority, run_at, 0)
            for n in range(start, start + count)
        ]
        store.enqueue_many(specs, 0, store.now())


def analyze(location: str) -> None:
    """Planner statistics, as a server gathers them soon after such a load."""
    seeding.analyze(location)


def claim_cost(location: str, workers: int, rounds: int) -> float:
    """Median ms of one exchange claiming for `workers` free workers and settling, as
    completed, the jobs the round before claimed."""
    policy = RetryPolicy()
    # Opened as the pool's dispatcher opens its own (plans made once and kept, on a server).
    with open_store(location, StoreOptions(planned_once=True)) as store:
        ids = [f"bench-claimer:{n}" for n in range(workers)]
        now = store.now()
        store.register_workers([_worker(worker_id, now) for worker_id in ids])
        held: list[Job] = []
        samples: list[float] = []
        for _ in range(rounds + 1):  # the first round only claims: not counted
            now = store.now()
            settlements = [_completed(job, now) for job in held]
            started = time.perf_counter()
            done = store.exchange(ClaimRequest(settlements, ids, 1, now, policy))
            samples.append((time.perf_counter() - started) * 1000)
            held = list(done.claimed.values())
            if len(held) < workers:
                raise RuntimeError(f"the backlog ran short: {len(held)} of {workers} claimed")
    return statistics.median(samples[1:])


def _worker(worker_id: str, now: int) -> Worker:
    return Worker(worker_id, "bench", 1, "bench", WorkerStatus.IDLE, now, now, None, None, 0, 0)


def _completed(job: Job, now: int) -> Settlement:
    return Settlement(job, Outcome.COMPLETED, 0, "", None, now)


def drain_rate(places: Places, location: str, workers: int, timeout: float = 600.0) -> float:
    """Jobs/s of a real pool of `workers` on the backlog at `location`, over DRAIN_TIMED
    jobs once it has run DRAIN_WARMUP (counted from what was completed before it started)."""
    log = places.folder / f"drain-{len(places.made)}.log"
    with open_store(location) as store:
        before = store.counts()[JobState.COMPLETED]
        with PoolProcess(location, workers, log):
            wait_for_completion(store, before + DRAIN_WARMUP, timeout)
            began_at = time.monotonic()
            wait_for_completion(store, before + DRAIN_WARMUP + DRAIN_TIMED, timeout)
    return DRAIN_TIMED / max(0.001, time.monotonic() - began_at)
