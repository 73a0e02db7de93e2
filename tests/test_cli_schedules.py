"""`queuectl schedule`: adding, listing, showing, pausing, resuming, running and removing
schedules; bad input gets one line on stderr and exit 2, and writes nothing."""

from __future__ import annotations

import json

import pytest

from helpers import RunCli


def _schedules(run_cli: RunCli) -> list[dict[str, object]]:
    result = run_cli("schedule", "list", "--json")
    assert result.returncode == 0, result.stderr
    found: list[dict[str, object]] = json.loads(result.stdout)
    return found


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--cron", "61 * * * *", "--command", "x"), "bad cron expression '61 * * * *'"),
        (("--cron", "0 2 * *", "--command", "x"), "a cron expression has 5 fields"),
        (("--cron", "@often", "--command", "x"), "unknown cron alias '@often'"),
        (("--every", "0s", "--command", "x"), "--every must be at least 1s"),
        (("--every", "5m", "--timezone", "Mars/Olympus", "--command", "x"), "unknown time zone"),
        (("--every", "5m", "--cron", "@daily", "--command", "x"), "either --cron or --every"),
        (("--every", "5m"), "--command is required"),
        (("--every", "5m", "--command", "x", "--priority", "high"), "--priority must be an"),
        (("--every", "5m", "--command", "x", "--catch-up", "most"), "--catch-up must be none"),
        (("--every", "5m", "--command", "x", "--env", "A"), "--env takes NAME=VALUE"),
        (("--every", "5m", "--type", "nope"), "unknown job type 'nope'"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    run_cli: RunCli, args: tuple[str, ...], words: str
) -> None:
    result = run_cli("schedule", "add", "nightly", *args)
    assert result.returncode == 2, result.stderr
    assert words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert _schedules(run_cli) == []
    assert run_cli("audit", "--json").stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["two words", "x" * 101, "tab\there"])
def test_a_bad_name_is_refused(run_cli: RunCli, name: str) -> None:
    result = run_cli("schedule", "add", name, "--every", "5m", "--command", "true")
    assert result.returncode == 2
    assert "a schedule's name must be 1 to 100 printable characters" in result.stderr
    assert _schedules(run_cli) == []


def test_add_list_show_pause_resume_run_remove(run_cli: RunCli) -> None:
    added = run_cli(
        "schedule",
        "add",
        "nightly",
        "--cron",
        "0 2 * * *",
        "--timezone",
        "Europe/Berlin",
        "--command",
        "echo [red]nightly",
        "--queue",
        "reports",
        "--priority",
        "3",
        "--max-retries",
        "1",
        "--timeout",
        "60",
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("Schedule nightly added: At 02:00 AM (Europe/Berlin); next")
    [listed] = _schedules(run_cli)
    assert (listed["name"], listed["schedule"], listed["timezone"], listed["origin"]) == (
        "nightly",
        "0 2 * * *",
        "Europe/Berlin",
        "cli",
    )
    assert listed["job"] == {
        "command": "echo [red]nightly",
        "queue": "reports",
        "priority": 3,
        "max_retries": 1,
        "timeout": 60.0,
    }
    table = run_cli("schedule", "list").stdout
    assert "nightly" in table and "At 02:00 AM" in table and "Europe/Berlin" in table
    shown = run_cli("schedule", "show", "nightly").stdout
    assert "echo [red]nightly" in shown  # untrusted text as it is, never markup
    assert run_cli("schedule", "pause", "nightly").returncode == 0
    assert json.loads(run_cli("schedule", "show", "nightly", "--json").stdout)["paused"]
    assert "paused" in run_cli("schedule", "list").stdout
    resumed = run_cli("schedule", "resume", "nightly")
    assert resumed.returncode == 0 and "next job at" in resumed.stdout
    ran = run_cli("schedule", "run", "nightly", "--quiet")
    assert ran.returncode == 0 and ran.stdout.startswith("nightly@run-")
    job = json.loads(run_cli("show", ran.stdout.strip(), "--json").stdout)
    assert (job["queue"], job["priority"], job["state"]) == ("reports", 3, "pending")
    shown = json.loads(run_cli("schedule", "show", "nightly", "--json").stdout)
    assert shown["last_job"]["id"] == ran.stdout.strip()
    removed = run_cli("schedule", "remove", "nightly")
    assert removed.returncode == 0 and "its jobs stay" in removed.stdout
    assert _schedules(run_cli) == []
    missing = run_cli("schedule", "show", "nightly")
    assert missing.returncode == 1 and "no schedule named 'nightly'" in missing.stderr
    actions = [entry["action"] for entry in json.loads(run_cli("audit", "--json").stdout)]
    assert actions == [
        "schedule-remove",
        "schedule-run",
        "schedule-resume",
        "schedule-pause",
        "schedule-add",
    ]


def test_a_taken_name_is_exit_1_and_the_first_kept(run_cli: RunCli) -> None:
    assert run_cli("schedule", "add", "a", "--every", "5m", "--command", "one").returncode == 0
    again = run_cli("schedule", "add", "a", "--every", "1m", "--command", "two")
    assert again.returncode == 1 and "already exists" in again.stderr
    [kept] = _schedules(run_cli)
    assert kept["job"] == {"command": "one", "queue": "default", "priority": 0}


def test_every_and_aliases(run_cli: RunCli) -> None:
    for name, args in (
        ("a", ("--every", "90s")),
        ("b", ("--cron", "@every 5m")),
        ("c", ("--cron", "@hourly")),
    ):
        assert run_cli("schedule", "add", name, *args, "--command", "true").returncode == 0
    shown = {s["name"]: (s["schedule"], s["description"]) for s in _schedules(run_cli)}
    assert shown == {
        "a": ("@every 1m30s", "Every 1 minute 30 seconds"),
        "b": ("@every 5m", "Every 5 minutes"),
        "c": ("@hourly", "Every hour"),
    }


def test_list_when_there_are_none(run_cli: RunCli) -> None:
    assert run_cli("schedule", "list", "--json").stdout.strip() == "[]"
    assert "No schedules yet" in run_cli("schedule", "list", "-o", "table").stdout
    assert run_cli("schedule", "list").stdout.split() == [
        "NAME",
        "SCHEDULE",
        "NEXT_UTC",
        "LAST_JOB",
        "STATE",
        "TZ",
        "ORIGIN",
        "WHEN",
    ]
