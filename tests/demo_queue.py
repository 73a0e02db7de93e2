"""A small, realistic queue with fixed ids and times: every state, attempt histories with
output, retries counting down, dead letters (one with hostile output), and live, stale and
stopped workers. The console's tests and the screenshots (scripts/) are taken on it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from queuectl_tui.lifecycle import RetryPolicy
from queuectl_tui.models import Job, JobSpec, Outcome, OutputChunk, Stream, Worker, WorkerStatus
from queuectl_tui.schedules import new_schedule, parse_schedule
from queuectl_tui.store import OutputAppend, Settlement, Store
from queuectl_tui.timeutil import parse_iso

DEMO_NOW = parse_iso("2026-07-24T10:00:00Z")
SECOND = 1000
MINUTE = 60 * SECOND

HOSTILE_COMMAND = "printf '[red]x[/red] \\033[31mred?\\033[0m\\n'; exit 3"
HOSTILE_OUTPUT = "[red]x[/red] \x1b[31mred?\x1b[0m\n[bold]not bold[/bold]\n"


@dataclass(frozen=True, slots=True)
class Run:
    exit_code: int | None
    output: str
    seconds: float = 1.0
    outcome: Outcome | None = None  # default: completed for exit 0, failed otherwise
    error: str | None = None


def _settle(store: Store, job_id: str, worker: str, start: int, run: Run, base: float) -> int:
    job = store.claim(worker, 4242, start)
    if job is None or job.id != job_id:
        raise RuntimeError(f"demo seeding claimed {job and job.id!r} instead of {job_id!r}")
    outcome = run.outcome or (Outcome.COMPLETED if run.exit_code == 0 else Outcome.FAILED)
    error = run.error
    if error is None and outcome is Outcome.FAILED:
        error = f"exit code {run.exit_code}"
    finished = start + int(run.seconds * SECOND)
    store.settle(
        Settlement(job, outcome, run.exit_code, run.output, error, finished),
        RetryPolicy(base, 86400),
    )
    return finished


def _job(
    store: Store,
    job_id: str,
    command: str,
    at: int,
    runs: list[Run],
    *,
    worker: str = "w-build-1",
    priority: int = 0,
    max_retries: int = 3,
    gap: int = 2 * SECOND,
    base: float = 1.0,
) -> None:
    spec = JobSpec(id=job_id, command=command, priority=priority, max_retries=max_retries)
    store.enqueue(spec, 3, at)
    start = at + 200
    for run in runs:
        start = _settle(store, job_id, worker, start, run, base) + gap


def seed_demo(store: Store, now: int = DEMO_NOW) -> None:
    """Fill an empty store with the demo queue as it looks at `now`."""
    _workers(store, now)  # only registered workers may claim; set again below as they end up
    t = now - 14 * MINUTE
    # Completed work spread over the last quarter hour, for the throughput sparkline.
    for index in range(24):
        minute = (index * 11) % 14
        at = now - (14 - minute) * MINUTE + index * SECOND
        output = f"resized {40 + index} images\nuploaded to s3://media/thumbs/{index:03d}\n"
        _job(store, f"thumbs-{index:03d}", f"./bin/thumbnail --batch {index}", at, [Run(0, output)])
    _job(
        store,
        "report-daily",
        "python -m reports.daily --date 2026-07-23",
        t + 30 * SECOND,
        [
            Run(1, "connecting to warehouse...\nerror: connection reset by peer\n", 3.2),
            Run(0, "connecting to warehouse...\nwrote 1,204 rows to daily.csv\n", 5.4),
        ],
        priority=5,
    )
    _job(
        store,
        "email-digest-77",
        "./bin/send-digest --user 77",
        now - 9 * MINUTE,
        [Run(0, "sent 1 email\n", 0.4)],
        worker="w-build-2",
    )
    # Dead letters: retries exhausted.
    _job(
        store,
        "backup-db",
        "pg_dump shop | gzip > /backups/shop.sql.gz",
        now - 13 * MINUTE,
        [
            Run(2, "pg_dump: error: connection to server failed\n", 0.3),
            Run(2, "pg_dump: error: connection to server failed\n", 0.3),
        ],
        max_retries=1,
    )
    _job(
        store,
        "hostile-output",
        HOSTILE_COMMAND,
        now - 12 * MINUTE,
        [Run(3, HOSTILE_OUTPUT, 0.1, error="exit code 3: [red]x[/red]\x1b[2J")],
        max_retries=0,
    )
    _job(
        store,
        "video-encode-9",
        "ffmpeg -i in/9.mov -c:v libx264 out/9.mp4",
        now - 11 * MINUTE,
        [Run(None, "frame= 1200 fps=24\n", 30.0, Outcome.TIMEOUT, "timed out after 30 s")],
        max_retries=0,
        worker="w-build-2",
    )
    _job(
        store,
        "sync-crm",
        "curl -fsS https://crm.example.com/api/sync",
        now - 10 * MINUTE,
        [Run(22, "curl: (22) The requested URL returned error: 503\n", 0.8)],
        max_retries=0,
    )
    # Failed, retry scheduled: waiting out their backoff.
    _job(
        store,
        "webhook-5521",
        "curl -fsS -X POST https://hooks.example.com/5521",
        now - 3 * MINUTE,
        [Run(7, "curl: (7) Failed to connect to hooks.example.com\n", 0.2)],
        base=300.0,
    )
    _job(
        store,
        "resize-avatars",
        "./bin/resize --all --size 128",
        now - 2 * MINUTE,
        [
            Run(1, "killed: out of memory\n", 12.0),
            Run(1, "killed: out of memory\n", 11.0),
        ],
        base=15.0,
        gap=16 * SECOND,
    )
    # Running now.
    for job_id, command, worker, ago in (
        ("import-orders", "python -m shop.import_orders --since yesterday", "w-build-1", 42),
        ("video-encode-10", "ffmpeg -i in/10.mov -c:v libx264 out/10.mp4", "w-build-2", 7),
    ):
        store.enqueue(JobSpec(id=job_id, command=command), 3, now - ago * SECOND - 300)
        claimed = store.claim(worker, 4242, now - ago * SECOND)
        if claimed is None or claimed.id != job_id:
            raise RuntimeError("demo seeding claimed the wrong job")
        _print_live(store, claimed, now - ago * SECOND)
    # Waiting: due now, and scheduled for later.
    for index, (job_id, command, priority, delay) in enumerate(
        (
            ("email-digest-78", "./bin/send-digest --user 78", 0, 0),
            ("email-digest-79", "./bin/send-digest --user 79", 0, 0),
            ("cleanup-tmp", "find /tmp/uploads -mtime +1 -delete", -5, 0),
            ("nightly-export", "./bin/export --format parquet", 10, 95 * MINUTE),
        )
    ):
        run_at = now + delay if delay else None
        spec = JobSpec(id=job_id, command=command, priority=priority, run_at=run_at)
        store.enqueue(spec, 3, now - (30 - index) * SECOND)
    _workers(store, now)
    _schedules(store, now)


def _schedules(store: Store, now: int) -> None:
    """Schedules whose last jobs are the demo's own (they make no job of their own)."""
    for name, fields, last, paused in (
        (
            "daily-report",
            {"cron": "0 6 * * *", "timezone": "Europe/Berlin", "command": "make report"},
            "report-daily",
            False,
        ),
        ("db-backup", {"cron": "30 2 * * *", "command": "./bin/backup"}, "backup-db", False),
        ("crm-sync", {"every": "15m", "command": "./bin/sync-crm"}, "sync-crm", False),
        ("thumbs-sweep", {"every": "30s", "command": "./bin/thumbs"}, "thumbs-023", True),
        (
            "weekly-digest",
            {"cron": "@weekly", "timezone": "America/New_York", "command": "./bin/digest"},
            None,
            False,
        ),
        ("[red]hostile[/red]", {"cron": "@hourly", "command": "true"}, None, False),
    ):
        schedule = new_schedule(name, parse_schedule(fields), "cli", now - 3 * 86_400_000)
        schedule = replace(
            schedule,
            next_at=schedule.spec.next_tick(now),
            paused=paused,
            last_job_id=last,
            last_fired_at=None if last is None else now - 9 * MINUTE,
        )
        store.add_schedule(schedule, None)


def _print_live(store: Store, job: Job, start: int) -> None:
    """What a running job has printed so far (its live output)."""
    lines = [
        (Stream.STDOUT, f"[{job.id}] step {step}/12: {name}\n")
        for step, name in enumerate(("connect", "fetch", "parse", "validate", "write"), 1)
    ]
    lines.insert(3, (Stream.STDERR, "warning: 3 rows without a price, skipped\n"))
    chunks, offset = [], 0
    for seq, (stream, text) in enumerate(lines):
        chunks.append(OutputChunk(seq, stream, text, start + (seq + 1) * SECOND, offset))
        offset += len(text.encode())
    assert job.worker_id is not None
    store.append_output([OutputAppend(job.id, job.runs, job.worker_id, chunks, 0)])


def _workers(store: Store, now: int) -> None:
    def worker(
        worker_id: str,
        pid: int,
        status: WorkerStatus,
        beat_ago: int,
        job: str | None,
        done: int,
        failed: int,
        stopped: bool = False,
    ) -> Worker:
        return Worker(
            id=worker_id,
            pool_id=f"pool-{pid}",
            pid=pid,
            host="ops-1",
            status=status,
            started_at=now - 20 * MINUTE,
            last_heartbeat=now - beat_ago * SECOND,
            stopped_at=now - beat_ago * SECOND if stopped else None,
            current_job=job,
            jobs_done=done,
            jobs_failed=failed,
        )

    store.register_workers(
        [
            worker("w-build-1", 4242, WorkerStatus.BUSY, 1, "import-orders", 31, 5),
            worker("w-build-2", 4242, WorkerStatus.BUSY, 2, "video-encode-10", 12, 2),
            worker("w-batch-1", 5150, WorkerStatus.IDLE, 41, None, 7, 0),
            worker("w-old-1", 3001, WorkerStatus.STOPPED, 600, None, 120, 3, stopped=True),
        ]
    )
