"""What recording one attempt costs under the triggers of an earlier schema and of the latest.

    python scripts/measure_attempt_cost.py [--version 3] [--attempts 20000]

Each round inserts the attempts in one transaction (rolled back) into a database made by the
migrations up to --version, then into one made by all of them, alternating; prints the median
and range of the cost per attempt in microseconds."""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from queuectl_tui.store.sqlite.schema import MIGRATIONS


def database(folder: Path, version: int) -> sqlite3.Connection:
    conn = sqlite3.connect(folder / f"v{version}.db", isolation_level=None)
    for migration in MIGRATIONS[:version]:
        conn.executescript(migration.script)
    conn.execute(
        "INSERT INTO jobs (seq, id, command, state, run_at, max_retries, attempts, runs, "
        "created_at, updated_at) VALUES (1, 'a', 'true', 'completed', 1, 3, 1, 1, 1, 1)"
    )
    return conn


def per_attempt_us(conn: sqlite3.Connection, attempts: int) -> float:
    rows = [(n, n * 10, n * 10 + 3, n * 10 + 40) for n in range(attempts)]
    started = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO attempts (job_seq, number, scheduled_at, started_at, finished_at, "
        "exit_code, outcome, output) VALUES (1, ?, ?, ?, ?, 0, 'completed', '')",
        rows,
    )
    conn.execute("ROLLBACK")
    return (time.perf_counter() - started) / attempts * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", type=int, default=3)
    parser.add_argument("--attempts", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        earlier = database(Path(folder), args.version)
        latest = database(Path(folder), len(MIGRATIONS))
        before, after = [], []
        for _ in range(args.rounds):
            before.append(per_attempt_us(earlier, args.attempts))
            after.append(per_attempt_us(latest, args.attempts))
    for name, samples in ((f"schema {args.version}", before), ("latest", after)):
        print(
            f"{name}: {statistics.median(samples):.2f} us per attempt "
            f"({min(samples):.2f}-{max(samples):.2f})"
        )


if __name__ == "__main__":
    main()
