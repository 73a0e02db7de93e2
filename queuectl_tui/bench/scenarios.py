"""The benchmark scenarios. Each runs on a fresh queue of its own (see places.py), keeps its
files in the run's temporary folder and returns plain numbers; the CLI renders them."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from ..lifecycle import RetryPolicy
from ..models import Job, JobSpec, JobState, Outcome, Worker, WorkerStatus
from ..query import parse_query
from ..store import Settlement, Store, open_store
from . import history
from .places import Places
from .pool_process import PoolProcess, cpu_seconds


@dataclass
class Measure:
    """One line of the report: a figure, optionally next to a baseline from the same run."""

    name: str
    value: float
    unit: str
    baseline: float | None = None
    target: str = ""
    details: dict[str, float | int | str] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0:
            return None
        return self.value / self.baseline

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "baseline": self.baseline,
            "ratio": self.ratio,
            "target": self.target,
            "details": self.details,
        }


def _queuectl(database: str, *args: str, stdin: str | None = None) -> float:
    """Run the real CLI in a fresh process; returns its wall time in seconds."""
    command = [sys.executable, "-m", "queuectl_tui", "--db", database, *args]
    started = time.perf_counter()
    subprocess.run(command, input=stdin, text=True, check=True, capture_output=True)
    return time.perf_counter() - started


def _median_ms(call: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def bulk_enqueue(places: Places, jobs: int) -> Measure:
    """`queuectl enqueue --file` of `jobs` JSON lines into an existing, empty queue, process
    start included (making the queue, a schema on a server, is not part of it)."""
    source = places.folder / "bulk.jsonl"
    with open(source, "w", encoding="utf-8") as out:
        for number in range(jobs):
            out.write(json.dumps({"id": f"bulk-{number}", "command": f"echo {number}"}) + "\n")
    location = places.location("bulk")
    open_store(location).close()
    seconds = _queuectl(location, "enqueue", "--file", str(source))
    return Measure(
        "bulk enqueue",
        jobs / seconds,
        "jobs/s",
        target=">= 100,000 jobs/s (100k in <= 1 s)",
        details={"jobs": jobs, "seconds": round(seconds, 3)},
    )


def run_bare_pool(command: str, jobs: int, workers: int) -> float:
    """The machine's own limit: `workers` threads spawning `/bin/sh -c command`, no queue."""

    def spawn(_: int) -> int:
        return subprocess.run(
            command, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ).returncode

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(spawn, range(jobs)))
    return time.perf_counter() - started


def wait_for_completion(store: Store, jobs: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while store.counts()[JobState.COMPLETED] < jobs:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{jobs} jobs did not complete within {timeout:.0f} s")
        time.sleep(0.01)


def throughput(
    places: Places, name: str, command: str, jobs: int, workers: int, rounds: int = 1
) -> Measure:
    """Jobs/s through an idle pool that receives `jobs` at once, against a bare thread pool
    spawning the same command. Bare runs and queue runs alternate (bare first and last), and
    each queue run is compared with the mean of the bare runs on either side of it; the
    figures are medians over `rounds`, so that a noisy moment of the machine weighs less.
    Queue time runs from the enqueue commit to the last job's finish."""
    bare = [run_bare_pool(command, jobs, workers)]
    queue: list[float] = []
    database = places.location(name)
    open_store(database).close()
    log = places.folder / f"{name}.log"
    with PoolProcess(database, workers, log), open_store(database) as store:
        time.sleep(0.5)  # let the pool settle into idle
        for round_number in range(rounds):
            enqueued_at = store.now()
            prefix = f"{name}-{round_number}-"
            store.enqueue_many(
                [JobSpec(f"{prefix}{n}", command, 0, None, 0) for n in range(jobs)],
                0,
                enqueued_at,
            )
            done_before = jobs * round_number
            wait_for_completion(store, done_before + jobs, timeout=max(60.0, bare[-1] * 20))
            finished = [
                job.finished_at or 0
                for job in store.list_jobs(JobState.COMPLETED, limit=jobs, newest_first=True)
            ]
            queue.append((max(finished) - enqueued_at) / 1000)
            bare.append(run_bare_pool(command, jobs, workers))
            time.sleep(0.2)  # the pool back to idle before the next round
    rates = [jobs / seconds for seconds in queue]
    baselines = [2 * jobs / (bare[n] + bare[n + 1]) for n in range(rounds)]
    return Measure(
        f"throughput, {command!r} x {jobs}, {workers} workers",
        statistics.median(rates),
        "jobs/s",
        baseline=statistics.median(baselines),
        details={
            "rounds": rounds,
            "queue_seconds": ",".join(f"{seconds:.3f}" for seconds in queue),
            "bare_seconds": ",".join(f"{seconds:.3f}" for seconds in bare),
            "ratios": ",".join(
                f"{rate / base:.3f}" for rate, base in zip(rates, baselines, strict=True)
            ),
        },
    )


def pickup(
    places: Places, jobs: int, rate: float, workers: int, idle_seconds: float
) -> list[Measure]:
    """Latency from the enqueue call to the claim for jobs arriving one by one from another
    process into an idle pool, and the CPU the idle pool uses."""
    database = places.location("pickup")
    open_store(database).close()
    pool = PoolProcess(database, workers, places.folder / "pickup.log")
    with pool, open_store(database) as store:
        time.sleep(0.5)
        cpu_before, wall_before = cpu_seconds(pool.pid), time.monotonic()
        time.sleep(idle_seconds)
        idle_cpu = (cpu_seconds(pool.pid) - cpu_before) / (time.monotonic() - wall_before) * 100
        called: dict[str, float] = {}
        interval = 1.0 / rate
        cpu_before = cpu_seconds(pool.pid)
        for number in range(jobs):
            job_id = f"pickup-{number}"
            # From the call, not its return: the pool may claim the job while the enqueue
            # still waits for the disk (the WAL is synced after the write turn is passed on).
            called[job_id] = time.time()
            store.enqueue(JobSpec(job_id, "true"), 0, store.now())
            time.sleep(interval)
        wait_for_completion(store, jobs, timeout=60)
        # Everything the pool spent while jobs trickled in, idle time between them included.
        trickle_cpu_ms = (cpu_seconds(pool.pid) - cpu_before) / jobs * 1000
    claimed = pool.claim_times()
    latencies = sorted(max(0.0, (claimed[j] - t) * 1000) for j, t in called.items() if j in claimed)
    if not latencies:
        raise RuntimeError("the pool logged no claims")
    p95 = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
    return [
        Measure(
            "pickup latency p50 (enqueue call to claim)",
            statistics.median(latencies),
            "ms",
            target="<= 2 ms",
            details={"jobs": len(latencies), "rate_per_s": rate},
        ),
        Measure("pickup latency p95", p95, "ms", target="<= 5 ms"),
        Measure("pickup latency max", latencies[-1], "ms"),
        Measure(
            "pool CPU per trickled job",
            trickle_cpu_ms,
            "ms",
            target="<= 1 ms",
            details={"rate_per_s": rate, "workers": workers},
        ),
        Measure(
            "idle pool CPU",
            idle_cpu,
            "% of one core",
            target="<= 3%",
            details={"seconds": idle_seconds, "workers": workers},
        ),
    ]


def at_scale(places: Places, jobs: int) -> list[Measure]:
    """Constant-time counts and one keyset page on a database of `jobs` pending jobs, then
    `stats` once every one of them has completed."""
    database = places.location("scale")
    history.enqueue_jobs(database, jobs, prefix="scale-")
    with open_store(database) as store:
        status_ms = _median_ms(store.queue_counts, 50)
        middle = jobs // 2
        page_ms = _median_ms(
            lambda: store.list_jobs(JobState.PENDING, limit=50, after_seq=middle), 50
        )
        _dead_letters(store, SCALE_DEAD, SCALE_RARE)
        rare = f"scale-{middle}x"
        searches = [
            (
                f'search error:"disk quota" ({SCALE_RARE} of {SCALE_DEAD:,} dead)',
                'error:"disk quota"',
            ),
            ("search for a rare id or command text (free text, a scan)", rare),
        ]
        search_ms = [
            (label, _median_ms(partial(_search, store, text), 9)) for label, text in searches
        ]
        started = time.perf_counter()
        store.set_text_index(True)  # queuectl search-index on
        index_s = time.perf_counter() - started
        indexed_ms = _median_ms(partial(_search, store, rare), 9)
        store.set_text_index(False)
    history.complete_all(database)
    with open_store(database) as store:
        stats_ms = _median_ms(lambda: store.stats(store.now()), 15)
    return [
        Measure(f"status counts, {jobs:,} jobs", status_ms, "ms", target="<= 5 ms"),
        Measure(f"one page of 50 jobs, {jobs:,} jobs", page_ms, "ms"),
        Measure(f"{search_ms[0][0]}, {jobs:,} jobs", search_ms[0][1], "ms", target="<= 50 ms"),
        Measure(f"{search_ms[1][0]}, {jobs:,} jobs", search_ms[1][1], "ms"),
        Measure(
            f"the same through the text index (search-index on), {jobs:,} jobs",
            indexed_ms,
            "ms",
            target="<= 50 ms",
            details={"index built in s": round(index_s, 1)},
        ),
        Measure(f"stats, {jobs:,} completed jobs", stats_ms, "ms", target="<= 50 ms"),
    ]


# Dead letters in the scale database, a few of them of a rare failure to search for.
SCALE_DEAD = 1_000
SCALE_RARE = 20


def _dead_letters(store: Store, dead: int, rare: int) -> None:
    """`dead` jobs that failed for good (claimed before the backlog: a higher priority),
    `rare` of them with a disk quota error, the rest refused connections."""
    policy = RetryPolicy(2.0, 60.0)
    now = store.now()
    store.register_workers(
        [
            Worker(
                "bench-w",
                "bench",
                os.getpid(),
                "bench",
                WorkerStatus.IDLE,
                now,
                now,
                None,
                None,
                0,
                0,
            )
        ]
    )
    store.enqueue_many([JobSpec(f"dead-{n}", "false", 1, None, 0) for n in range(dead)], 0, now)
    for n in range(dead):
        job = store.claim("bench-w", os.getpid(), now)
        assert job is not None
        line = (
            f"error: disk quota exceeded on /data/{n}" if n < rare else f"refused 10.0.0.{n % 250}"
        )
        store.settle(Settlement(job, Outcome.FAILED, 1, line + "\n", "exit code 1", now), policy)


def _search(store: Store, text: str) -> int:
    """One page of a search's matches, and its count (as the console reads them)."""
    query = parse_query(text, store.now())
    store.list_jobs(limit=100, newest_first=True, query=query)
    return store.count_jobs(query)


def cli_start(places: Places, repeat: int = 7) -> Measure:
    """Wall time of `queuectl status` in a fresh process (median)."""
    database = places.location("cli")
    open_store(database).close()
    samples = [_queuectl(database, "status") * 1000 for _ in range(repeat)]
    return Measure(
        "queuectl status, cold process",
        statistics.median(samples),
        "ms",
        target="<= 250 ms",
        details={"runs": repeat},
    )


# What the pool logs when it gives up waiting for the database and backs off.
GIVE_UP_EVENT = "database error, retrying"


def _percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


def bulk_loaded_rate(store: Store, prefix: str, jobs: int, done_before: int) -> float:
    """Jobs/s of `jobs` trivial jobs enqueued at once, from the commit to the last finish."""
    enqueued_at = store.now()
    store.enqueue_many(
        [JobSpec(f"{prefix}{n}", "true", 0, None, 0) for n in range(jobs)], 0, enqueued_at
    )
    wait_for_completion(store, done_before + jobs, timeout=120)
    finished = [job.finished_at or 0 for job in _newest_completed(store, prefix, jobs)]
    return jobs / max(0.001, (max(finished) - enqueued_at) / 1000)


def _newest_completed(store: Store, prefix: str, jobs: int) -> list[Job]:
    newest = store.list_jobs(JobState.COMPLETED, limit=jobs, newest_first=True)
    return [job for job in newest if job.id.startswith(prefix)]


@dataclass
class ProducedPhase:
    """One producer run into the pool: what the producer and the pool did meanwhile."""

    enqueue_rate: float
    pool_rate: float  # jobs finished while the producer ran, per second of its run
    finished_during: int
    give_ups: int
    p50_ms: float
    p95_ms: float


def _produce(
    places: Places,
    pool: PoolProcess,
    store: Store,
    prefix: str,
    jobs: int,
    rate: float,
    done_before: int,
) -> ProducedPhase:
    """Run the producer process (`rate` 0: flat out) and wait until its jobs are done."""
    out = places.folder / f"{prefix}producer.json"
    give_ups_before = pool.count_events(GIVE_UP_EVENT)
    command = [
        sys.executable,
        "-m",
        "queuectl_tui.bench.producer",
        pool.database,
        prefix,
        str(jobs),
        str(rate),
        str(out),
    ]
    subprocess.run(command, check=True, capture_output=True)
    wait_for_completion(store, done_before + jobs, timeout=120)
    report = json.loads(out.read_text(encoding="utf-8"))
    began, ended, starts = report["began"], report["ended"], report["starts"]
    finished = {
        job.id: (job.finished_at or 0) / 1000 for job in _newest_completed(store, prefix, jobs)
    }
    latencies = sorted(
        max(0.0, finished[f"{prefix}{n}"] - start) * 1000 for n, start in enumerate(starts)
    )
    during = sum(1 for at in finished.values() if at <= ended)
    seconds = max(0.001, ended - began)
    return ProducedPhase(
        enqueue_rate=jobs / seconds,
        pool_rate=during / seconds,
        finished_during=during,
        give_ups=pool.count_events(GIVE_UP_EVENT) - give_ups_before,
        p50_ms=statistics.median(latencies),
        p95_ms=_percentile(latencies, 0.95),
    )


# The paced producer's rate, as a share of the pool's bulk-loaded rate: a producer and a pool
# at 0.8 of it together need more than two cores (see docs/performance.md).
PACED_SHARE = 0.5
PACED_LABEL = "paced at half capacity"


def mixed(places: Places, jobs: int, workers: int, rounds: int = 1) -> list[Measure]:
    """A producer in another process enqueueing one job per transaction (the Python API) into
    a running pool of trivial jobs: paced at half the pool's capacity, then flat out.
    Capacity is the pool's throughput on the same jobs bulk-loaded, measured in each round
    just before; figures are medians over the rounds."""
    database = places.location("mixed")
    open_store(database).close()
    capacity: list[float] = []
    paced: list[ProducedPhase] = []
    flat: list[ProducedPhase] = []
    with (
        PoolProcess(database, workers, places.folder / "mixed.log") as pool,
        open_store(database) as store,
    ):
        time.sleep(0.5)
        done = 0
        for number in range(rounds):
            capacity.append(bulk_loaded_rate(store, f"mixed-{number}-bulk-", jobs, done))
            done += jobs
            time.sleep(0.2)
            pace = PACED_SHARE * capacity[-1]
            paced.append(_produce(places, pool, store, f"mixed-{number}-paced-", jobs, pace, done))
            done += jobs
            time.sleep(0.2)
            flat.append(_produce(places, pool, store, f"mixed-{number}-flat-", jobs, 0, done))
            done += jobs
            time.sleep(0.2)
    return _mixed_measures(jobs, capacity, paced, flat)


def _joined(values: list[float]) -> str:
    return ",".join(f"{value:.1f}" for value in values)


def _over_rounds(
    name: str,
    values: list[float],
    unit: str,
    target: str = "",
    baseline: float | None = None,
    details: dict[str, float | int | str] | None = None,
) -> Measure:
    """A measure taken in every round: the median, with each round's value in the details."""
    return Measure(
        name,
        statistics.median(values),
        unit,
        baseline=baseline,
        target=target,
        details={**(details or {}), "rounds_values": _joined(values)},
    )


def _mixed_measures(
    jobs: int, capacity: list[float], paced: list[ProducedPhase], flat: list[ProducedPhase]
) -> list[Measure]:
    bulk = statistics.median(capacity)
    common: dict[str, float | int | str] = {"jobs": jobs, "rounds": len(capacity)}
    measures = [_over_rounds("mixed, bulk-loaded capacity", capacity, "jobs/s", details=common)]
    for label, phases in ((PACED_LABEL, paced), ("flat out", flat)):
        flat_out = phases is flat
        measures += [
            _over_rounds(
                f"mixed, {label}: enqueue rate",
                [p.enqueue_rate for p in phases],
                "jobs/s",
                target=">= 1,500 jobs/s" if flat_out else "",
            ),
            _over_rounds(
                f"mixed, {label}: give-ups", [float(p.give_ups) for p in phases], "count", "0"
            ),
            _over_rounds(f"mixed, {label}: end-to-end p50", [p.p50_ms for p in phases], "ms"),
            _over_rounds(
                f"mixed, {label}: end-to-end p95",
                [p.p95_ms for p in phases],
                "ms",
                target="" if flat_out else "<= 20 ms",
            ),
        ]
    measures.append(
        _over_rounds(
            "mixed, flat out: pool throughput while producing (baseline: bulk-loaded)",
            [p.pool_rate for p in flat],
            "jobs/s",
            target=">= 0.8x bulk-loaded",
            baseline=bulk,
            details={"finished_during": ",".join(str(p.finished_during) for p in flat)},
        )
    )
    return measures
