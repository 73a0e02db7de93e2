"""The root's --db and --config also after the command's name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from queuectl_tui.cli.global_options import hoisted

from helpers import RunCli


@pytest.mark.parametrize(
    ("given", "run_as"),
    [
        (["status", "--db", "q.db"], ["--db", "q.db", "status"]),
        (["list", "--db=q.db", "--json"], ["--db=q.db", "list", "--json"]),
        (
            ["config", "set", "max-retries", "5", "--config", "c.json"],
            ["--config", "c.json", "config", "set", "max-retries", "5"],
        ),
        (
            ["--config", "c.json", "status", "--db", "q.db"],
            ["--config", "c.json", "--db", "q.db", "status"],
        ),
        # Left alone: bench's own --db, the words after --, a --db without its value.
        (["bench", "--db", "postgresql://h/db"], ["bench", "--db", "postgresql://h/db"]),
        (["enqueue", "--", "echo", "--db", "x"], ["enqueue", "--", "echo", "--db", "x"]),
        (["status", "--db"], ["status", "--db"]),
        (["--version"], ["--version"]),
    ],
)
def test_the_global_options_move_before_the_command(given: list[str], run_as: list[str]) -> None:
    assert hoisted(given) == run_as


def test_a_database_named_after_the_command_is_the_one_used(
    run_cli: RunCli, tmp_path: Path
) -> None:
    other = tmp_path / "other.db"
    added = run_cli("enqueue", '{"id": "there", "command": "true"}', "--db", str(other), db=False)
    assert added.returncode == 0, added.stderr
    listed = run_cli("list", "--json", "--db", str(other), db=False)
    assert [job["id"] for job in json.loads(listed.stdout)] == ["there"]
    assert json.loads(run_cli("list", "--json").stdout) == []  # the test's own database
