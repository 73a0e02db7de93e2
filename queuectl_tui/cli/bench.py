"""`queuectl bench`: throughput, pickup latency, scale and start-up, measured on this machine."""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..location import normalise, scheme
from .context import guarded, print_json, state

if TYPE_CHECKING:
    from rich.table import Table

    from ..bench.backlog import Backlog
    from ..bench.scenarios import Measure

SCENARIOS = (
    "bulk",
    "slow",
    "trivial",
    "mixed",
    "pickup",
    "backlog",
    "pools",
    "schedule",
    "workflow",
    "scale",
    "cli",
    "http",
)

# Where PostgreSQL's targets differ from SQLite's (by the start of the measure's name): a
# round trip to a server costs more than a write to a local file.
POSTGRES_TARGETS = {
    "throughput, 'true'": ">= 0.75x the bare pool",
    "pickup latency p50": "<= 3 ms",
}


@guarded
def bench(
    ctx: typer.Context,
    db: str | None = typer.Option(
        None,
        "--db",
        metavar="URL",
        help="A postgresql:// URL: measure PostgreSQL, each scenario in a schema of its own in "
        "that database, dropped afterwards. Default: temporary SQLite files.",
    ),
    quick: bool = typer.Option(False, "--quick", help="Small sizes; runs in seconds."),
    workers: int = typer.Option(10, "--workers", min=1, max=256, help="Pool size."),
    bulk: int | None = typer.Option(None, "--bulk", min=1, help="Jobs for bulk enqueue."),
    slow_jobs: int | None = typer.Option(None, "--slow-jobs", min=1, help="'sleep 0.05' jobs."),
    trivial_jobs: int | None = typer.Option(None, "--trivial-jobs", min=1, help="'true' jobs."),
    pickup_jobs: int | None = typer.Option(None, "--pickup-jobs", min=1, help="Pickup samples."),
    mixed_jobs: int | None = typer.Option(
        None, "--mixed-jobs", min=1, help="Jobs per phase of the mixed scenario."
    ),
    scale: int | None = typer.Option(None, "--scale", min=1, help="Jobs in the scale database."),
    http_jobs: int | None = typer.Option(
        None, "--http-jobs", min=1, help="HTTP submissions per client and round."
    ),
    rounds: int | None = typer.Option(
        None, "--rounds", min=1, max=50, help="Throughput rounds (medians are reported)."
    ),
    only: list[str] | None = typer.Option(
        None, "--only", help="Run only these: " + ", ".join(SCENARIOS) + "."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Measure bulk enqueue, throughput against a bare process pool, a producer feeding a
    running pool (mixed), pickup latency, idle CPU, claim cost and drain rate as the backlog
    grows (backlog), 1, 2 and 4 pools on one queue (pools), an @every 1s schedule firing into
    a busy pool (schedule: how late each tick's job is claimed, one job per tick), a fan-out
    to 1,000 jobs and a fan-in (workflow), queries on a large database, CLI start-up, and
    durable HTTP submissions (http). Runs on temporary databases: SQLite files,
    or with --db (or the global --db) a PostgreSQL URL, schemas of their own there. Your own
    queue is never touched.

    Examples: queuectl bench --quick; queuectl bench --db postgresql://localhost/test
    """
    from ..bench import scenarios
    from ..bench.places import Places
    from . import render

    sizes = {
        "bulk": bulk or (2_000 if quick else 100_000),
        "slow": slow_jobs or (100 if quick else 1_000),
        "trivial": trivial_jobs or (200 if quick else 2_000),
        "pickup": pickup_jobs or (20 if quick else 200),
        "mixed": mixed_jobs or (200 if quick else 2_000),
        "scale": scale or (20_000 if quick else 1_000_000),
        "http": http_jobs or (200 if quick else 2_000),
        "schedule": 5 if quick else 15,  # seconds of an @every 1s schedule
        "workflow": 200 if quick else 1_000,  # jobs between a fan-out and a fan-in
    }
    repeat = rounds or (1 if quick else 3)
    chosen = set(only or SCENARIOS)
    unknown = chosen - set(SCENARIOS)
    if unknown:
        raise typer.BadParameter(
            f"unknown scenario: {', '.join(sorted(unknown))}", param_hint="--only"
        )
    base_url = _postgres_url(db or state(ctx).db_path)
    if db and base_url is None:
        raise typer.BadParameter("a postgresql:// URL, or none for SQLite", param_hint="--db")
    folder = Path(tempfile.mkdtemp(prefix="queuectl-bench-"))
    places = Places(folder, base_url)
    results: list[scenarios.Measure] = []

    def say(text: str) -> None:
        if not as_json:
            render.console().print(text, style="dim")

    try:
        database = places.describe()  # first: a server that cannot be reached fails here
        if "bulk" in chosen:
            say(f"bulk enqueue of {sizes['bulk']:,} jobs ...")
            results.append(scenarios.bulk_enqueue(places, sizes["bulk"]))
        if "slow" in chosen:
            say(f"{sizes['slow']:,} x 'sleep 0.05' on {workers} workers, and the bare pool ...")
            results.append(
                scenarios.throughput(places, "slow", "sleep 0.05", sizes["slow"], workers, repeat)
            )
            results[-1].target = ">= 0.97x the bare pool"
        if "trivial" in chosen:
            say(f"{sizes['trivial']:,} x 'true' on {workers} workers, and the bare pool ...")
            results.append(
                scenarios.throughput(places, "trivial", "true", sizes["trivial"], workers, repeat)
            )
            results[-1].target = ">= 0.85x the bare pool"
        if "mixed" in chosen:
            say(
                f"a producer of {sizes['mixed']:,} x 'true', one per transaction, into "
                f"{workers} workers: paced at half capacity, then flat out ..."
            )
            results += scenarios.mixed(places, sizes["mixed"], workers, repeat)
        if "pickup" in chosen:
            say(f"pickup latency of {sizes['pickup']} jobs at 20/s into an idle pool ...")
            idle = 2.0 if quick else 10.0
            results += scenarios.pickup(places, sizes["pickup"], 20.0, workers, idle)
        if "backlog" in chosen:
            from ..bench import backlog

            loads = _backlogs(quick)
            say(
                "claim cost and drain rate on backlogs of "
                + ", ".join(load.label for load in loads)
                + f", {workers} workers ..."
            )
            results += backlog.measure(places, loads, workers)
        if "pools" in chosen:
            from ..bench import pools

            say(f"1, 2 and 4 pools of {workers} workers on {sizes['trivial']:,} x 'true' ...")
            results += pools.measure(places, sizes["trivial"], workers, repeat)
        if "schedule" in chosen:
            from ..bench import schedule_load

            say(
                f"an @every 1s schedule for {sizes['schedule']} s into {workers} workers "
                "draining a backlog of 'sleep 0.05' ..."
            )
            results += schedule_load.measure(places, workers, sizes["schedule"])
        if "workflow" in chosen:
            from ..bench import workflow

            say(
                f"a fan-out to {sizes['workflow']:,} jobs and a fan-in, on {workers} workers, "
                "and the same jobs without links ..."
            )
            results += workflow.measure(places, sizes["workflow"], workers)
        if "scale" in chosen:
            say(f"a database of {sizes['scale']:,} jobs ...")
            results += scenarios.at_scale(places, sizes["scale"])
        if "cli" in chosen:
            results.append(scenarios.cli_start(places))
        if "http" in chosen:
            from ..bench import http_load

            say(
                f"{sizes['http']:,} HTTP submissions per client with 1 and 8 clients, and the "
                "store's own insert ..."
            )
            results += http_load.http_submissions(places, sizes["http"], repeat)
    finally:
        try:
            places.close()  # also on Ctrl+C or a failure: no schema is left on the server
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    if places.backend == "postgresql":
        for measure in results:
            measure.target = _postgres_target(measure.name, measure.target)
    if quick:  # sizes too small to say anything against a target: none is shown
        for measure in results:
            measure.target = ""
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    if as_json:
        print_json(
            {
                "machine": machine,
                "backend": places.backend,
                "database": database,
                "results": [m.to_dict() for m in results],
            }
        )
        return
    caption = f"{machine}\ndatabase: {database}"
    if quick:
        caption += "\n--quick: small sizes, a check that it runs; targets are judged on full runs"
    render.console().print(_table(results, caption))


def _backlogs(quick: bool) -> list[Backlog]:
    """The backlogs measured, smallest first (the others are compared with it)."""
    from ..bench.backlog import Backlog

    if quick:
        return [Backlog(2_000), Backlog(20_000), Backlog(20_000, later=10_000)]
    sizes = (2_000, 20_000, 200_000, 1_000_000)
    return [*(Backlog(due) for due in sizes), Backlog(200_000, later=100_000)]


def _postgres_url(location: str | None) -> str | None:
    """The PostgreSQL URL to measure, or None for SQLite: a file given to the global --db is
    left alone (the bench fills queues of its own), temporary files are measured."""
    if location is None:
        return None
    where = normalise(location)
    return where if scheme(where) == "postgresql" else None


def _postgres_target(name: str, target: str) -> str:
    for start, postgres_target in POSTGRES_TARGETS.items():
        if name.startswith(start):
            return postgres_target
    return target


def _figure(value: float | None) -> str:
    if value is None:
        return ""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def _table(results: list[Measure], machine: str) -> Table:
    from rich.table import Table

    table = Table(title="queuectl bench", caption=machine, header_style="bold")
    # The baseline is the bare pool for throughput, else what the measure's name says.
    judged = any(measure.target for measure in results)  # none in a --quick run
    columns = ("MEASURE", "QUEUECTL", "UNIT", "BASELINE", "RATIO", *(("TARGET",) * judged))
    for column in columns:
        table.add_column(
            column, justify="left" if column in ("MEASURE", "UNIT", "TARGET") else "right"
        )
    for measure in results:
        ratio = measure.ratio
        table.add_row(
            measure.name,
            _figure(measure.value),
            measure.unit,
            _figure(measure.baseline),
            "" if ratio is None else f"{ratio:.3f}x",
            *((measure.target,) * judged),
        )
    return table


def register(app: typer.Typer) -> None:
    app.command()(bench)
