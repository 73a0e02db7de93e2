"""`queuectl enqueue` the way people type it: options, a command string, `-- CMD ARGS`, JSON,
and many jobs from a file or a pipe in JSON Lines, a JSON array or objects across lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import RunCli, wait_until


def _jobs(run_cli: RunCli) -> list[dict[str, Any]]:
    result = run_cli("list", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _refused(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 2, result.stdout
    assert words in result.stderr
    if "Usage:" not in result.stderr:  # the parser's own errors show the usage first
        assert len(result.stderr.strip().splitlines()) == 1


def test_every_field_as_an_option(run_cli: RunCli) -> None:
    result = run_cli(
        "enqueue",
        "--command",
        "echo hi",
        "--id",
        "opt1",
        "--priority",
        "5",
        "--max-retries",
        "2",
        "--timeout",
        "30",
        "--run-at",
        "2030-01-02T03:04:05Z",
        "--queue",
        "reports",
        "--idempotency-key",
        "k1",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Enqueued job opt1\n"
    [job] = _jobs(run_cli)
    assert (job["id"], job["command"], job["priority"]) == ("opt1", "echo hi", 5)
    assert (job["max_retries"], job["timeout"], job["queue"]) == (2, 30.0, "reports")
    assert job["run_at"].startswith("2030-01-02T03:04:05")
    assert job["idempotency_key"] == "k1"


def test_a_command_string_a_word_list_and_words_after_dash_dash(run_cli: RunCli) -> None:
    assert run_cli("enqueue", "echo Hello World | tr a-z A-Z").returncode == 0
    assert run_cli("enqueue", "echo", "two", "words").returncode == 0
    # After --, every word is an argument: quoted, never an option or JSON.
    after_dash = ["printf", "%s|", "it's", "$HOME", "--id", "{}"]
    assert run_cli("enqueue", "--priority", "3", "--", *after_dash).returncode == 0
    commands = [(job["command"], job["priority"]) for job in _jobs(run_cli)]
    assert commands == [
        ("echo Hello World | tr a-z A-Z", 0),
        ("echo two words", 0),
        ("printf '%s|' 'it'\"'\"'s' '$HOME' --id '{}'", 3),
    ]


def test_words_after_dash_dash_run_as_typed(run_cli: RunCli, tmp_path: Path) -> None:
    out = tmp_path / "out"
    script = f'printf "%s" "$1" > {out}'
    result = run_cli("enqueue", "--id", "w", "--", "sh", "-c", script, "-", "a b$c")
    assert result.returncode == 0, result.stderr
    assert run_cli("worker", "start", "--detach").returncode == 0
    try:
        wait_until(lambda: _jobs(run_cli)[0]["state"] == "completed", what="the job")
    finally:
        assert run_cli("worker", "stop", "--wait").returncode == 0
    assert out.read_text() == "a b$c"


def test_a_shell_test_is_a_command_and_json_text_is_a_job(run_cli: RunCli) -> None:
    assert run_cli("enqueue", "[ -d / ] && echo yes").returncode == 0
    assert run_cli("enqueue", '{"command": "true", "id": "j"}', "--priority", "4").returncode == 0
    [shell_test, from_json] = _jobs(run_cli)
    assert shell_test["command"] == "[ -d / ] && echo yes"
    assert (from_json["id"], from_json["priority"]) == ("j", 4)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (('{"command": "x", "priority": 1}', "--priority", "2"), "in the JSON job and as --pri"),
        (("--command", "a", "--", "b"), "'command' is given twice: in the words after -- and"),
        (("--max-retries", "-1", "--command", "x"), "--max-retries must be between 0 and"),
        (("--run-at", "soon", "--command", "x"), "--run-at is not an ISO 8601 time"),
        (("--timeout", "0", "--command", "x"), "--timeout must be greater than 0"),
        (("--id", "   ", "--command", "x"), "--id must not be blank"),
        (("--queue", "a b", "--command", "x"), "--queue"),
        (("--priority", "high", "--command", "x"), "'high' is not a valid int"),
        (("--",), "no command after --"),
        (("echo", "--", "hi"), "either after -- or before it"),
        (("--file", "-", "--command", "x"), "either one job or --file"),
        (("--priority", "3"), "no command: give --command CMD"),
        (("--file", "-", "--priority", "3"), "--priority: for one job"),
        (('{"id": "x"}',), "field 'command' is required"),
        (("",), "'command' must not be empty"),
        (('["not", "a job"]',), "a job must be a JSON object"),
    ],
)
def test_bad_forms_are_one_sentence_and_write_nothing(
    run_cli: RunCli, args: tuple[str, ...], words: str
) -> None:
    _refused(run_cli("enqueue", *args), words)
    assert _jobs(run_cli) == []


def test_a_pipe_is_read_without_dash_file(run_cli: RunCli) -> None:
    lines = '{"id": "p1", "command": "true"}\n{"id": "p2", "command": "true"}\n'
    result = run_cli("enqueue", input=lines)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Enqueued 2 jobs\n"
    assert [job["id"] for job in _jobs(run_cli)] == ["p1", "p2"]
    _refused(run_cli("enqueue", input=""), "no jobs in the input")


def test_a_terminal_on_stdin_with_nothing_to_enqueue_is_told_how(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    controller, terminal = os.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "queuectl_tui", "--db", str(tmp_path / "q.db"), "enqueue"],
            stdin=terminal,
            capture_output=True,
            text=True,
            env=cli_env,
            timeout=60,
        )
    finally:
        os.close(controller)
        os.close(terminal)
    _refused(result, "give a job: a command, --command CMD, JSON, or --file PATH")


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ('[{"id": "a", "command": "true"}, {"id": "b", "command": "true"}]', ["a", "b"]),
        ('{\n  "id": "pretty",\n  "command": "true"\n}\n', ["pretty"]),
        (
            '{\n "id": "o1", "command": "true"\n}\n{\n "id": "o2",\n "command": "true"\n}',
            ["o1", "o2"],
        ),
        (
            '{"id": "l1", "command": "true"}\r\n\r\n{"id": "l2", "command": "true"}\r\n',
            ["l1", "l2"],
        ),
    ],
    ids=["array", "one-pretty-object", "objects-across-lines", "json-lines"],
)
def test_file_forms_are_told_from_their_content(
    run_cli: RunCli, tmp_path: Path, text: str, ids: list[str]
) -> None:
    source = tmp_path / "jobs.json"
    source.write_text(text)
    result = run_cli("enqueue", "--file", str(source))
    assert result.returncode == 0, result.stderr
    assert [job["id"] for job in _jobs(run_cli)] == ids


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            '[{"command": "true"}, {"command": "true", "priority": "x"}]',
            "index 1: field 'priority'",
        ),
        (
            '[{"id": "a", "command": "x"}, {"id": "a", "command": "y"}]',
            "index 1: id 'a' already appears at index 0",
        ),
        ('[{"command": "true"},]', "invalid JSON in a JSON array"),
        (
            '{\n "command": "a"\n}\n{\n "command": 3\n}',
            "object 2: field 'command' must be a string",
        ),
        ('{\n "command": "a"\n}\n{\n "command": \n', "invalid JSON in object 2"),
        ('{\n "command": 3\n}', "field 'command' must be a string"),
        ('{"command": "a"}\n\n{"command": "b", "colour": 1}', "line 3: unknown field 'colour'"),
    ],
    ids=[
        "array-field",
        "array-repeat",
        "array-syntax",
        "object-field",
        "object-syntax",
        "lone",
        "lines",
    ],
)
def test_file_errors_name_the_line_index_or_object(run_cli: RunCli, text: str, words: str) -> None:
    _refused(run_cli("enqueue", "--file", "-", input=text), words)
    assert _jobs(run_cli) == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("{command:", "echo x}"), "the JSON job is split into words: quote it as one argument"),
        (("{ date; uptime; } >> log",), "a shell command that starts with { goes after --"),
        (("--run-at", "2030-01-01T00:00:00Z", "--delay", "5m", "true"), "--run-at or --delay"),
    ],
)
def test_mistakes_with_braces_and_times_are_told(
    run_cli: RunCli, args: tuple[str, ...], words: str
) -> None:
    _refused(run_cli("enqueue", *args), words)
    assert _jobs(run_cli) == []


def test_a_dash_reads_stdin_and_an_empty_array_is_no_jobs(run_cli: RunCli) -> None:
    assert run_cli("enqueue", "-", input='{"id": "from-stdin", "command": "true"}').returncode == 0
    assert [job["id"] for job in _jobs(run_cli)] == ["from-stdin"]
    _refused(run_cli("enqueue", input="[]"), "no jobs in the input")
    # A brace group is a command after --.
    assert run_cli("enqueue", "--id", "braces", "--", "sh", "-c", "{ true; }").returncode == 0
