"""The CLI of an operator's control: queues, cancel, retry, delete, prune, audit; bad input
gets one line and exit 2, and changes nothing."""

from __future__ import annotations

import json

import pytest

from helpers import RunCli


def _enqueue(run_cli: RunCli, **job: object) -> None:
    assert run_cli("enqueue", json.dumps(job)).returncode == 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("cancel",), "give one or more job ids, or a filter"),
        (("delete", "a", "--state", "dead"), "give one or more job ids, or a filter"),
        (("retry", "--state", "sleepy"), "unknown state 'sleepy'"),
        (("prune", "--state", "completed", "--older-than", "7x"), "not a duration"),
        (("prune", "--state", "pending", "--older-than", "7d"), "only finished jobs"),
        (("prune", "--older-than", "7d"), "give the states to prune"),
        (("queue", "limit", "reports", "many"), "N must be a number of jobs or 'none'"),
        (("queue", "limit", "reports", "0"), "limit must be 1 to"),
        (("queue", "limit", "reports", "\u00b2"), "N must be a number of jobs or 'none'"),
        (("prune", "--state", "dead", "--older-than", "\u00b2d"), "not a duration"),
        (("queue", "pause", "no spaces"), "must be a queue name"),
        (("worker", "start", "--queue", "a/b"), "--queue must be a queue name"),
        (("enqueue", '{"command":"true","queue":""}'), "field 'queue' must be a queue name"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    run_cli: RunCli, args: tuple[str, ...], words: str
) -> None:
    _enqueue(run_cli, id="a", command="true")
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert run_cli("audit", "--json").stdout.strip() == "[]"  # nothing was done


def test_cancel_retry_and_delete_say_what_they_did_to_each_job(run_cli: RunCli) -> None:
    for job_id in ("a", "b"):
        _enqueue(run_cli, id=job_id, command="true", queue="reports")
    result = run_cli("cancel", "--queue", "reports")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["Job a cancelled", "Job b cancelled"]
    again = run_cli("cancel", "a", "ghost")
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr == (
        "Error: job 'a' is cancelled: nothing to cancel; no job with id 'ghost'\n"
    )
    retried = run_cli("retry", "a")
    assert retried.stdout.strip() == "Job a moved from cancelled to pending"
    deleted = run_cli("delete", "--state", "cancelled")
    assert deleted.stdout.strip() == "Job b deleted"
    listed = json.loads(run_cli("list", "--json").stdout)
    assert [(job["id"], job["state"], job["queue"]) for job in listed] == [
        ("a", "pending", "reports")
    ]
    actions = [entry["action"] for entry in json.loads(run_cli("audit", "--json").stdout)]
    assert actions == ["delete", "retry", "cancel"]  # the refused cancel is not on record


@pytest.mark.parametrize(
    "command", [("cancel",), ("delete",), ("retry",), ("dlq", "retry")], ids=" ".join
)
def test_an_unknown_id_is_an_error_on_stderr_and_is_not_audited(
    run_cli: RunCli, command: tuple[str, ...]
) -> None:
    _enqueue(run_cli, id="a", command="true")
    result = run_cli(*command, "nope")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "Error: no job with id 'nope'\n"
    assert run_cli("audit", "--json").stdout.strip() == "[]"
    assert json.loads(run_cli("list", "--json").stdout)[0]["state"] == "pending"


def test_what_was_done_is_on_stdout_and_what_was_refused_on_stderr(run_cli: RunCli) -> None:
    _enqueue(run_cli, id="a", command="true")
    result = run_cli("cancel", "a", "nope")
    assert result.returncode == 1
    assert (result.stdout, result.stderr) == ("Job a cancelled\n", "Error: no job with id 'nope'\n")
    [line] = json.loads(run_cli("audit", "--json").stdout)
    assert (line["action"], line["touched"]) == ("cancel", 1)


def test_queue_list_shows_depth_pause_and_limit(run_cli: RunCli) -> None:
    _enqueue(run_cli, id="a", command="true", queue="reports")
    _enqueue(run_cli, id="b", command="true")
    assert run_cli("queue", "pause", "reports").returncode == 0
    assert run_cli("queue", "limit", "reports", "3").returncode == 0
    shown = {q["name"]: q for q in json.loads(run_cli("queue", "list", "--json").stdout)}
    assert shown["reports"]["paused"] and shown["reports"]["max_running"] == 3
    assert shown["reports"]["waiting"] == 1 and not shown["default"]["paused"]
    table = run_cli("queue", "list").stdout
    assert "paused" in table and "reports" in table


def test_prune_dry_run_counts_and_prune_removes(run_cli: RunCli) -> None:
    _enqueue(run_cli, id="a", command="true")
    assert run_cli("cancel", "a").returncode == 0
    dry = run_cli("prune", "--state", "cancelled", "--older-than", "0s", "--dry-run")
    assert dry.stdout.startswith("1 cancelled job finished more than 0s ago would be removed")
    assert json.loads(run_cli("list", "--json").stdout)[0]["id"] == "a"
    done = run_cli("prune", "--state", "cancelled", "--older-than", "0s")
    assert done.stdout.startswith("Removed 1 cancelled job")
    assert json.loads(run_cli("list", "--json").stdout) == []


def test_list_and_status_by_queue(run_cli: RunCli) -> None:
    _enqueue(run_cli, id="a", command="true", queue="reports")
    _enqueue(run_cli, id="b", command="true")
    listed = json.loads(run_cli("list", "--queue", "reports", "--json").stdout)
    assert [job["id"] for job in listed] == ["a"]
    counts = json.loads(run_cli("status", "--queue", "default", "--json").stdout)
    assert (counts["pending"], counts["total"]) == (1, 1)
