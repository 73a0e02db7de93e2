"""Every reader copes with any value the database holds, including ones queuectl never writes
itself (another program, an old version, a hand edit): no command may crash on them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from queuectl_tui.timeutil import parse_iso, to_iso, to_iso_seconds

from helpers import RunCli

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
YEAR_10000 = 253_402_300_800_000  # the first millisecond of year 10000
YEAR_0 = -62_135_596_800_001  # the last millisecond before year 1
HOSTILE_TIMES = (INT64_MAX, INT64_MIN, YEAR_10000, YEAR_0)


def _refuse(constant: str) -> None:
    raise AssertionError(f"{constant} is not JSON")


def poison(db_path: Path, job_id: str, when: int, state: str = "pending") -> None:
    """Give job `job_id` the time `when` in every time column, out-of-range numbers in the
    others, and an attempt and a worker with the same times."""
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "UPDATE jobs SET state = ?, run_at = ?, created_at = ?, updated_at = ?, "
            "claimed_at = ?, finished_at = ?, priority = ?, max_retries = ?, timeout = ?, "
            "attempts = ?, runs = ?, exit_code = ? WHERE id = ?",
            (
                state,
                *(when,) * 5,
                INT64_MIN if when < 0 else INT64_MAX,
                INT64_MAX,
                float("inf") if when == INT64_MAX else -1e308,
                INT64_MIN,
                INT64_MAX,
                INT64_MIN,
                job_id,
            ),
        )
        seq = conn.execute("SELECT seq FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
        conn.execute(
            "INSERT INTO attempts (job_seq, number, worker_id, scheduled_at, started_at, "
            "finished_at, exit_code, outcome, output, error) "
            "VALUES (?, ?, 'w', ?, ?, ?, ?, 'failed', 'out', 'err')",
            (seq, INT64_MAX, when, -when if when != INT64_MIN else INT64_MAX, when, INT64_MAX),
        )
        conn.execute(
            "INSERT INTO workers (id, pool_id, pid, host, status, started_at, last_heartbeat) "
            "VALUES (?, 'p', ?, 'h', 'stopped', ?, ?)",
            (f"worker-{job_id}", INT64_MAX, when, when),
        )


@pytest.mark.parametrize("when", HOSTILE_TIMES)
def test_to_iso_never_raises_and_names_the_instant(when: int) -> None:
    text = to_iso(when)
    assert text is not None and text.endswith("Z")
    assert to_iso_seconds(when) == text.split(".")[0].replace("T", " ")


def test_to_iso_writes_expanded_years_like_javascript() -> None:
    assert to_iso(YEAR_10000) == "+010000-01-01T00:00:00.000Z"
    assert to_iso(YEAR_0) == "0000-12-31T23:59:59.999Z"
    assert to_iso(INT64_MAX) == "+292278994-08-17T07:12:55.807Z"
    assert to_iso(INT64_MIN) == "-292275055-05-16T16:47:04.192Z"
    assert to_iso(-1) == "1969-12-31T23:59:59.999Z"
    assert to_iso(parse_iso("0275-02-24T10:16:25.370Z")) == "0275-02-24T10:16:25.370Z"
    assert to_iso(1.5) == "1970-01-01T00:00:00.001Z"  # type: ignore[arg-type]  # a REAL another program wrote
    assert to_iso(float("inf")) == "inf"  # type: ignore[arg-type]


def test_every_reader_copes_with_hostile_stored_values(run_cli: RunCli, db_path: Path) -> None:
    for number, when in enumerate(HOSTILE_TIMES):
        job_id = f"job-{number}"
        assert run_cli("enqueue", json.dumps({"id": job_id, "command": "true"})).returncode == 0
        poison(db_path, job_id, when, state=("pending", "dead", "failed", "completed")[number])
    commands: list[tuple[str, ...]] = [
        ("list",),
        ("list", "--newest"),
        ("list", "--json"),
        ("dlq", "list"),
        ("dlq", "list", "--json"),
        ("stats",),
        ("stats", "--json"),
        ("status",),
        ("workers",),
        ("workers", "--json"),
    ]
    commands += [("show", f"job-{n}") for n in range(len(HOSTILE_TIMES))]
    commands += [("show", "--json", f"job-{n}") for n in range(len(HOSTILE_TIMES))]
    for args in commands:
        result = run_cli(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert "Traceback" not in result.stderr, args
        if "--json" in args:
            json.loads(result.stdout, parse_constant=_refuse)  # strict: no Infinity or NaN
    listed = json.loads(run_cli("list", "--json").stdout)
    assert [job["run_at"] for job in listed] == [to_iso(when) for when in HOSTILE_TIMES]
    shown = run_cli("list").stdout
    for number in range(len(HOSTILE_TIMES)):
        assert f"job-{number}" in shown


def test_the_stuck_job_can_be_retried_from_the_dead_letter_queue(
    run_cli: RunCli, db_path: Path
) -> None:
    assert run_cli("enqueue", '{"id":"stuck","command":"true"}').returncode == 0
    poison(db_path, "stuck", YEAR_10000, state="dead")
    assert run_cli("dlq", "retry", "stuck").returncode == 0
    assert json.loads(run_cli("show", "--json", "stuck").stdout)["state"] == "pending"


def test_an_outcome_or_worker_status_this_version_does_not_know_is_shown_as_unknown(
    run_cli: RunCli, db_path: Path
) -> None:
    assert run_cli("enqueue", '{"id":"odd","command":"true"}').returncode == 0
    poison(db_path, "odd", 1_700_000_000_000, state="dead")
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE attempts SET outcome = 'vanished'")
        conn.execute("UPDATE workers SET status = 'napping'")
    for args in (("show", "odd"), ("workers",)):
        result = run_cli(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert "unknown" in result.stdout, args
    shown = json.loads(run_cli("show", "--json", "odd").stdout)
    assert [attempt["outcome"] for attempt in shown["attempt_history"]] == ["unknown"]
    workers = json.loads(run_cli("workers", "--json").stdout)
    assert [worker["status"] for worker in workers] == ["unknown"]
