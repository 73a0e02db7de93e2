"""Output for its reader: plain aligned columns in a pipe (one header line, one row per line,
ids and commands whole), a table with `--output table`, JSON with `--output json`."""

from __future__ import annotations

import json

import pytest

from helpers import RunCli, wait_until

BOX = set("│┃━─┏┗┡╇")


def _dead_jobs(run_cli: RunCli, *ids: str) -> None:
    for job_id in ids:
        command = f"echo {job_id} failed; exit 3"
        assert run_cli("enqueue", "--id", job_id, "--max-retries", "0", command).returncode == 0
    assert run_cli("worker", "start", "--detach").returncode == 0
    try:
        wait_until(
            lambda: len(json.loads(run_cli("dlq", "list", "--json").stdout)) == len(ids),
            timeout=30,
            what="the jobs to die",
        )
    finally:
        assert run_cli("worker", "stop", "--wait").returncode == 0


def test_status_in_a_pipe_is_name_and_number_lines(run_cli: RunCli) -> None:
    for number in range(3):
        assert run_cli("enqueue", f"echo {number}").returncode == 0
    lines = run_cli("status").stdout.splitlines()
    assert lines[0].split() == ["STATE", "JOBS"]
    counts = {line.split()[0]: int(line.split()[1]) for line in lines[1:]}
    assert counts["pending"] == 3 and counts["total"] == 3 and counts["active_workers"] == 0
    assert all(len(line.split()) == 2 for line in lines)
    assert [line for line in lines if "pending" in line] == ["pending            3"]


def test_dlq_list_second_line_first_field_is_the_first_dead_id(run_cli: RunCli) -> None:
    _dead_jobs(run_cli, "first-to-die", "second")
    lines = run_cli("dlq", "list").stdout.splitlines()
    assert lines[0].split() == ["ID", "ATTEMPTS", "EXIT", "DIED_UTC", "LAST_ERROR", "COMMAND"]
    newest_first = [job["id"] for job in json.loads(run_cli("dlq", "list", "--json").stdout)]
    assert lines[1].split()[0] == newest_first[0]
    assert [line.split()[0] for line in lines[1:]] == newest_first
    assert not BOX & set("".join(lines))
    # The time is one field, the command whole at the end of the line.
    assert lines[1].split()[3].count("T") == 1
    assert lines[1].endswith(f"echo {newest_first[0]} failed; exit 3")


def test_plain_rows_keep_long_ids_and_commands_whole(
    run_cli: RunCli, cli_env: dict[str, str]
) -> None:
    long_id = "job-" + "x" * 150
    command = "echo " + "word " * 40
    assert run_cli("enqueue", "--id", long_id, "--command", command.strip()).returncode == 0
    cli_env["COLUMNS"] = "40"
    [header, row] = run_cli("list").stdout.splitlines()
    assert header.split()[:2] == ["ID", "STATE"]
    assert row.split()[0] == long_id and row.endswith(command.strip())
    assert len(header.split()) == len(row.split()) - command.count("word")


def test_an_empty_listing_in_a_pipe_is_its_header(run_cli: RunCli) -> None:
    assert run_cli("dlq", "list").stdout.split() == [
        "ID",
        "ATTEMPTS",
        "EXIT",
        "DIED_UTC",
        "LAST_ERROR",
        "COMMAND",
    ]
    assert run_cli("dlq", "list", "-o", "table").stdout == "The dead letter queue is empty.\n"


@pytest.mark.parametrize(
    "args",
    [
        ("list",),
        ("status",),
        ("stats",),
        ("workers",),
        ("queue", "list"),
        ("dlq", "list"),
        ("dlq", "groups"),
        ("audit",),
        ("schedule", "list"),
        ("config", "list"),
    ],
)
def test_every_listing_chooses_its_format(run_cli: RunCli, args: tuple[str, ...]) -> None:
    assert run_cli("enqueue", "--id", "one", "true").returncode == 0
    assert run_cli("queue", "pause", "default").returncode == 0  # something for audit
    piped = run_cli(*args)
    assert piped.returncode == 0 and not BOX & set(piped.stdout), piped.stderr
    as_json = json.loads(run_cli(*args, "--json").stdout)
    assert type(json.loads(run_cli(*args, "--output", "json").stdout)) is type(as_json)
    table = run_cli(*args, "-o", "table").stdout
    assert BOX & set(table) or len(table.splitlines()) == 1  # an empty listing says so
    bad = run_cli(*args, "--output", "yaml")
    assert bad.returncode == 2 and "choose one of: table, plain, json" in bad.stderr
    both = run_cli(*args, "--json", "-o", "plain")
    assert both.returncode == 2 and "disagree" in both.stderr


def test_a_read_of_a_path_without_a_queue_says_so_and_creates_nothing(
    run_cli: RunCli, db_path
) -> None:
    result = run_cli("status")
    assert result.returncode == 0 and "pending" in result.stdout
    assert (
        result.stderr
        == f"note: there is no queue at {db_path} yet (the first enqueue or pool makes it)\n"
    )
    assert not db_path.exists()
    assert run_cli("enqueue", "true").returncode == 0
    assert run_cli("status").stderr == ""


def test_a_bad_format_is_refused_before_anything_is_read(run_cli: RunCli) -> None:
    result = run_cli("list", "-o", "yaml")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "Error: unknown output format 'yaml'; choose one of: table, plain, json"
    ]
