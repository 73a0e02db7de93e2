"""The CLI contract, through real subprocesses."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from queuectl_tui.timeutil import parse_iso

from helpers import RunCli

JOB_KEYS = {
    "id",
    "command",
    "state",
    "attempts",
    "max_retries",
    "priority",
    "run_at",
    "created_at",
    "updated_at",
}


def _row_count(db_path: Path) -> int:
    if not db_path.exists():
        return 0
    with sqlite3.connect(db_path) as conn:
        return conn.execute("SELECT count(*) FROM jobs").fetchone()[0]


def test_enqueue_then_list_json(run_cli: RunCli) -> None:
    result = run_cli("enqueue", '{"id":"job1","command":"echo Hello"}')
    assert result.returncode == 0, result.stderr
    assert "job1" in result.stdout
    listed = run_cli("list", "--json")
    assert listed.returncode == 0
    jobs = json.loads(listed.stdout)
    assert isinstance(jobs, list) and len(jobs) == 1
    job = jobs[0]
    assert job.keys() >= JOB_KEYS
    assert (job["id"], job["command"], job["state"], job["attempts"]) == (
        "job1",
        "echo Hello",
        "pending",
        0,
    )
    assert job["created_at"].endswith("Z") and "T" in job["created_at"]


def test_list_json_is_an_empty_array_when_empty(run_cli: RunCli) -> None:
    result = run_cli("list", "--json")
    assert result.returncode == 0 and json.loads(result.stdout) == []
    assert json.loads(run_cli("dlq", "list", "--json").stdout) == []
    assert json.loads(run_cli("list", "--state", "dead", "--json").stdout) == []


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ("{not json", "invalid JSON"),
        ('["a"]', "JSON object"),
        ('{"command": ""}', "'command'"),
        ('{"command": "x", "priority": "high"}', "'priority'"),
        ('{"command": "x", "color": "red"}', "'color'"),
        ('{"command": "x", "run_at": "soon"}', "'run_at'"),
        ('{"command": "x", "max_retries": -1}', "'max_retries'"),
        ('{"id": "   ", "command": "x"}', "field 'id' must not be blank"),
        ('{"id": "a ", "command": "x"}', "must not begin or end with whitespace"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    run_cli: RunCli, db_path: Path, payload: str, words: str
) -> None:
    result = run_cli("enqueue", payload)
    assert result.returncode == 2
    assert words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert _row_count(db_path) == 0


def test_duplicate_id_fails_and_keeps_the_original(run_cli: RunCli) -> None:
    assert run_cli("enqueue", '{"id":"a","command":"echo one"}').returncode == 0
    again = run_cli("enqueue", '{"id":"a","command":"echo two"}')
    assert again.returncode == 1 and "already exists" in again.stderr
    [job] = json.loads(run_cli("list", "--json").stdout)
    assert job["command"] == "echo one"


def test_idempotency_key_prints_the_existing_id(run_cli: RunCli) -> None:
    first = run_cli("enqueue", '{"id":"a","command":"x","idempotency_key":"k"}', "--quiet")
    assert first.stdout.strip() == "a"
    second = run_cli("enqueue", '{"id":"b","command":"x","idempotency_key":"k"}')
    assert second.returncode == 0 and "a" in second.stdout.split()[1]
    assert len(json.loads(run_cli("list", "--json").stdout)) == 1


def test_bulk_file_is_all_or_nothing_with_line_numbers(
    run_cli: RunCli, tmp_path: Path, db_path: Path
) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(
        "".join(json.dumps({"id": f"j{i}", "command": "true"}) + "\n" for i in range(50))
    )
    result = run_cli("enqueue", "--file", str(good))
    assert result.returncode == 0 and "Enqueued 50 jobs" in result.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id":"x1","command":"true"}\n\n{"id":"x2","command":"true","nope":1}\n')
    refused = run_cli("enqueue", "--file", str(bad))
    assert refused.returncode == 2 and "line 3" in refused.stderr and "'nope'" in refused.stderr
    clash = tmp_path / "clash.jsonl"
    clash.write_text('{"id":"new","command":"true"}\n{"id":"j7","command":"true"}\n')
    refused = run_cli("enqueue", "--file", str(clash))
    assert refused.returncode == 1 and "j7" in refused.stderr
    assert _row_count(db_path) == 50
    stdin = run_cli("enqueue", "--file", "-", input='{"id":"s1","command":"true"}\n')
    assert stdin.returncode == 0 and _row_count(db_path) == 51


def test_status_and_stats_json(run_cli: RunCli) -> None:
    run_cli("enqueue", '{"id":"a","command":"true"}')
    status = json.loads(run_cli("status", "--json").stdout)
    assert status["pending"] == 1 and status["total"] == 1 and status["active_workers"] == 0
    stats = json.loads(run_cli("stats", "--json").stdout)
    assert stats["counts"]["pending"] == 1
    assert {"throughput", "attempts", "latency_ms"} <= stats.keys()
    assert stats["queue"] is None


def test_stats_of_one_queue(run_cli: RunCli) -> None:
    run_cli("enqueue", '{"id":"a","command":"true","queue":"reports"}')
    run_cli("enqueue", '{"id":"b","command":"true"}')
    stats = json.loads(run_cli("stats", "--queue", "reports", "--json").stdout)
    assert stats["queue"] == "reports" and stats["counts"]["pending"] == 1
    assert stats["counts"]["total"] == 1
    shown = run_cli("stats", "--queue", "reports", "-o", "table")
    assert shown.returncode == 0 and "Activity, queue reports" in shown.stdout
    bad = run_cli("stats", "--queue", "no spaces")
    assert bad.returncode == 2 and "--queue must be a queue name" in bad.stderr


def test_show_and_unknown_ids(run_cli: RunCli) -> None:
    run_cli("enqueue", '{"id":"a","command":"echo [red]x[/red]"}')
    shown = run_cli("show", "a")
    assert shown.returncode == 0 and "echo [red]x[/red]" in shown.stdout
    data = json.loads(run_cli("show", "a", "--json").stdout)
    assert data["id"] == "a" and data["attempt_history"] == []
    missing = run_cli("show", "nope")
    assert missing.returncode == 1 and missing.stderr.strip() == "Error: no job with id 'nope'"


def test_dlq_retry_of_a_job_that_is_not_dead(run_cli: RunCli) -> None:
    run_cli("enqueue", '{"id":"a","command":"true"}')
    result = run_cli("dlq", "retry", "a")
    assert result.returncode == 1 and "not in the dead letter queue" in result.stderr
    assert run_cli("dlq", "retry").returncode == 2
    empty = run_cli("dlq", "retry", "--all")
    assert empty.returncode == 0 and "empty" in empty.stdout


def test_dlq_retry_moves_dead_jobs_back(run_cli: RunCli, db_path: Path) -> None:
    for job_id in "abc":
        run_cli("enqueue", json.dumps({"id": job_id, "command": "false"}))
    with sqlite3.connect(db_path) as conn:  # as if their retries had run out: b last, c first
        for job_id, died in (("a", 2), ("b", 3), ("c", 1)):
            conn.execute(
                "UPDATE jobs SET state = 'dead', attempts = 4, finished_at = ? WHERE id = ?",
                (died, job_id),
            )
    dead = json.loads(run_cli("dlq", "list", "--json").stdout)
    assert [job["id"] for job in dead] == ["b", "a", "c"]  # the latest to die first
    result = run_cli("dlq", "retry", "a")
    assert result.returncode == 0 and "pending" in result.stdout
    job = json.loads(run_cli("show", "a", "--json").stdout)
    assert (job["state"], job["attempts"]) == ("pending", 0)


def test_config_commands(run_cli: RunCli, tmp_path: Path) -> None:
    config = tmp_path / "cwd" / "config.json"
    assert run_cli("config", "set", "max-retries", "5").returncode == 0
    assert json.loads(config.read_text()) == {"max_retries": 5}
    assert run_cli("config", "get", "max-retries").stdout.strip() == "5"
    unknown = run_cli("config", "set", "colour", "blue")
    assert unknown.returncode == 2 and "valid settings:" in unknown.stderr
    bad = run_cli("config", "set", "backoff-base", "fast")
    assert bad.returncode == 2 and "backoff-base" in bad.stderr
    assert json.loads(config.read_text()) == {"max_retries": 5}
    listed = json.loads(run_cli("config", "list", "--json").stdout)
    assert listed["max-retries"] == 5 and listed["backoff-base"] == 2
    run_cli("enqueue", '{"id":"a","command":"true"}')
    [job] = json.loads(run_cli("list", "--json").stdout)
    assert job["max_retries"] == 5


def test_config_the_ways_other_queues_spell_it(run_cli: RunCli, tmp_path: Path) -> None:
    config = tmp_path / "cwd" / "config.json"
    assert run_cli("config", "set", "--key", "max-retries", "--value", "4").returncode == 0
    assert json.loads(config.read_text()) == {"max_retries": 4}
    every = run_cli("config", "get").stdout.splitlines()
    assert "max-retries = 4" in every and "backoff-base = 2" in every
    assert "max-retries" in run_cli("config", "show").stdout  # the same as list
    negative = run_cli("config", "set", "max-retries", "-1")  # a value, not an option
    assert negative.returncode == 2 and "max-retries must be at least 0" in negative.stderr
    both = run_cli("config", "set", "max-retries", "5", "--value", "6")
    assert both.returncode == 2 and "not both" in both.stderr
    assert run_cli("config", "set", "--key", "max-retries").returncode == 2
    assert json.loads(config.read_text()) == {"max_retries": 4}


def test_list_filters_by_state_and_rejects_unknown_states(run_cli: RunCli) -> None:
    run_cli("enqueue", '{"id":"a","command":"true"}')
    assert json.loads(run_cli("list", "--state", "completed", "--json").stdout) == []
    assert len(json.loads(run_cli("list", "--state", "pending", "--json").stdout)) == 1
    wrong = run_cli("list", "--state", "done")
    assert wrong.returncode == 2 and "unknown state 'done'" in wrong.stderr


def test_human_list_never_cuts_an_id(run_cli: RunCli, cli_env: dict[str, str]) -> None:
    long_id = "a-rather-long-job-identifier-" + "x" * 60
    run_cli("enqueue", json.dumps({"id": long_id, "command": "true"}))
    cli_env["COLUMNS"] = "80"
    out = run_cli("list", "-o", "table").stdout
    first_column = [line.split("│")[1].strip() for line in out.splitlines() if "│" in line]
    assert "".join(first_column) == long_id
    assert max(len(line) for line in out.splitlines()) <= 80


def test_every_command_has_help_with_an_example(run_cli: RunCli) -> None:
    for command in (
        ["enqueue"],
        ["list"],
        ["show"],
        ["status"],
        ["stats"],
        ["workers"],
        ["worker", "start"],
        ["worker", "stop"],
        ["dlq", "list"],
        ["dlq", "retry"],
        ["config", "list"],
        ["config", "show"],
        ["config", "get"],
        ["config", "set"],
        ["dashboard"],
    ):
        result = run_cli(*command, "--help", db=False)
        assert result.returncode == 0, command
        assert "Example: queuectl" in result.stdout, command


def test_cli_does_not_import_textual(run_cli: RunCli, db_path: Path, cli_env) -> None:
    import subprocess
    import sys

    code = (
        "import sys; from queuectl_tui.cli.app import app\n"
        "try:\n    app(['--db', sys.argv[1], 'status'])\nexcept SystemExit: pass\n"
        "print('textual' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(db_path)],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=60,
    )
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_unreadable_database_location_is_one_line(run_cli: RunCli, tmp_path: Path) -> None:
    result = run_cli("--db", str(tmp_path / "missing" / "q.db"), "status", db=False)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: ") and "Traceback" not in result.stderr


def test_bulk_file_refuses_an_id_repeated_in_the_input(run_cli: RunCli, tmp_path: Path) -> None:
    lines = [json.dumps({"id": f"j{i}", "command": "true"}) for i in range(30_000)]
    lines.append(json.dumps({"id": "j5", "command": "true"}))
    source = tmp_path / "repeat.jsonl"
    source.write_text("\n".join(lines) + "\n")
    result = run_cli("enqueue", "--file", str(source))
    assert result.returncode == 2
    assert "line 30001: id 'j5' already appears on line 6" in result.stderr
    assert json.loads(run_cli("list", "--json").stdout) == []


def test_two_values_on_one_line_are_refused(run_cli: RunCli, tmp_path: Path) -> None:
    source = tmp_path / "two.jsonl"
    source.write_text('{"command":"true"}\n{"command":"true"} {"command":"true"}\n')
    result = run_cli("enqueue", "--file", str(source))
    assert result.returncode == 2 and "line 2" in result.stderr


def test_json_output_escapes_c1_controls_and_bidi_marks(run_cli: RunCli, db_path: Path) -> None:
    controls = "\x9b\u202e\u2066\u200f\u061c\x85"
    hostile = "\x9b31m\u202eevil\u2066\u200f\u061c\x85"
    command = f"echo '{hostile}'"
    assert run_cli("enqueue", json.dumps({"id": "j", "command": command})).returncode == 0
    with sqlite3.connect(db_path) as conn:  # as a run of that command would have left them
        conn.execute(
            "UPDATE jobs SET state = 'dead', finished_at = 3, last_error = ? WHERE id = 'j'",
            (hostile,),
        )
        conn.execute(
            "INSERT INTO attempts (job_seq, number, worker_id, scheduled_at, started_at, "
            "finished_at, outcome, output, error) SELECT seq, 1, ?, 1, 2, 3, 'failed', ?, ? "
            "FROM jobs WHERE id = 'j'",
            (hostile, hostile, hostile),
        )
        conn.execute(
            "INSERT INTO workers (id, pool_id, pid, host, status, started_at, last_heartbeat, "
            "current_job) VALUES (?, 'p', 1, ?, 'stopped', 1, 2, ?)",
            (hostile, hostile, hostile),
        )
    outputs = {
        args: run_cli(*args).stdout
        for args in [
            ("list", "--json"),
            ("show", "--json", "j"),
            ("dlq", "list", "--json"),
            ("workers", "--all", "--json"),  # its worker ended long ago
        ]
    }
    for args, out in outputs.items():
        assert not any(char in out for char in controls), args
        assert "\\u009b" in out and "\\u202e" in out, args
    job = json.loads(outputs[("show", "--json", "j")])
    assert job["command"] == command and job["last_error"] == hostile
    attempt = job["attempt_history"][0]
    assert attempt["output"] == attempt["error"] == attempt["worker_id"] == hostile
    assert json.loads(outputs[("list", "--json")])[0]["command"] == command
    assert json.loads(outputs[("dlq", "list", "--json")])[0]["last_error"] == hostile
    worker = json.loads(outputs[("workers", "--all", "--json")])[0]
    assert worker["id"] == worker["host"] == worker["current_job"] == hostile


NARROW_IDS = ["job-1", "nightly-backup-20261201", "550e8400-e29b-41d4-a716-446655440000"]
LONG_COMMAND = "rsync -a --delete /var/lib/app/data/ backup@host:/srv/backups/app/"


def _table_rows(out: str) -> list[list[str]]:
    """The cells of each printed line of a bordered or borderless table (header first)."""
    lines = [line for line in out.splitlines() if line.strip()]
    if any("│" in line for line in lines):
        return [
            [cell.strip() for cell in line.split(line[0])[1:-1]]
            for line in lines
            if line.startswith(("│", "┃"))
        ]
    return [re.split(r"\s{2,}", line.strip()) for line in lines]  # 2+ spaces between cells


def _folded_rows(out: str) -> list[list[str]]:
    """Table rows with an id that folded onto following lines joined back together."""
    rows: list[list[str]] = []
    for cells in _table_rows(out)[1:]:
        if rows and (len(cells) == 1 or not any(cells[1:])):
            rows[-1][0] += cells[0]
        else:
            rows.append(cells)
    return rows


@pytest.mark.parametrize("width", [40, 60, 80])
def test_list_never_squeezes_ids_states_priorities_or_tries(
    run_cli: RunCli, cli_env: dict[str, str], width: int
) -> None:
    for job_id in NARROW_IDS:
        job = {"id": job_id, "command": LONG_COMMAND, "priority": -2147483647}
        assert run_cli("enqueue", json.dumps(job)).returncode == 0
    cli_env["COLUMNS"] = str(width)
    out = run_cli("list", "-o", "table").stdout
    assert max(len(line) for line in out.splitlines()) <= width
    header, *_ = _table_rows(out)
    assert header[:4] == ["ID", "STATE", "PRI", "TRIES"]
    rows = _folded_rows(out)
    assert [row[:4] for row in rows] == [
        [job_id, "pending", "-2147483647", "0/4"] for job_id in NARROW_IDS
    ]
    longest_row = len(NARROW_IDS[-1]) + len("pending") + len("-2147483647") + len("TRIES") + 6
    if longest_row <= width:  # room for every id on one line: none may fold
        assert all(any(job_id in line for line in out.splitlines()) for job_id in NARROW_IDS)
    if "COMMAND" in header:
        assert all(row[-1].startswith("rsync") for row in rows)


@pytest.mark.parametrize("columns", ["", "wide", "0", "-3", "99999999999", "²"])
def test_a_bad_columns_value_is_ignored(
    run_cli: RunCli, cli_env: dict[str, str], columns: str
) -> None:
    assert run_cli("enqueue", '{"id": "job-1", "command": "true"}').returncode == 0
    cli_env["COLUMNS"] = columns
    for args in [("list",), ("status",), ("show", "job-1")]:
        result = run_cli(*args)
        assert result.returncode == 0 and result.stderr == "", (args, result.stderr)
        assert "job-1" in result.stdout or "pending" in result.stdout


@pytest.mark.parametrize("width", [40, 60, 80])
def test_other_tables_fit_the_width_and_keep_ids_whole(
    run_cli: RunCli, cli_env: dict[str, str], db_path: Path, width: int
) -> None:
    for job_id in NARROW_IDS:
        assert (
            run_cli("enqueue", json.dumps({"id": job_id, "command": LONG_COMMAND})).returncode == 0
        )
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "UPDATE jobs SET state = 'dead', runs = 4, exit_code = 1, "
            "last_error = 'exit code 1: rsync: connection unexpectedly closed'"
        )
        conn.execute(
            "INSERT INTO attempts (job_seq, number, worker_id, scheduled_at, started_at, "
            "finished_at, exit_code, outcome, output, error) SELECT seq, 1, 'host-4242-w1', "
            "1000, 2000, 3000, 1, 'failed', 'some output', 'exit code 1' FROM jobs"
        )
        conn.execute(
            "INSERT INTO workers (id, pool_id, pid, host, status, started_at, last_heartbeat, "
            "current_job) VALUES ('backup-host-4242-w1', 'p', 4242, 'backup-host', 'stopped', "
            "1000, 2000, ?)",
            (NARROW_IDS[-1],),
        )
    cli_env["COLUMNS"] = str(width)
    outputs = {
        args: run_cli(*args)
        for args in [
            ("dlq", "list", "-o", "table"),  # a table, though stdout is a pipe
            ("workers", "--all", "-o", "table"),
            ("status", "-o", "table"),
            ("stats", "-o", "table"),
            ("show", "job-1"),
        ]
    }
    for args, result in outputs.items():
        assert result.returncode == 0, (args, result.stderr)
        assert max(len(line) for line in result.stdout.splitlines()) <= width, args
    dead = _folded_rows(outputs[("dlq", "list", "-o", "table")].stdout)
    # All died at once, as far as their times say: the latest enqueued is listed first.
    assert [row[:3] for row in dead] == [[job_id, "4", "1"] for job_id in NARROW_IDS[::-1]]
    workers = _folded_rows(outputs[("workers", "--all", "-o", "table")].stdout)
    assert [row[:2] for row in workers] == [["backup-host-4242-w1", "stopped"]]
    assert "job-1" in outputs[("show", "job-1")].stdout


def test_commands_that_draw_nothing_start_without_loading_rich(tmp_path: Path) -> None:
    """enqueue and the pool are the commands scripts run most; rich costs them tens of ms."""
    script = (
        "import sys\n"
        "from queuectl_tui.cli.app import app\n"
        "try:\n"
        "    app(['--db', sys.argv[1], 'enqueue', '{\"command\": \"true\"}'])\n"
        "except SystemExit as done:\n"
        "    assert not done.code, done.code\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'rich'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "q.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"


# -- Ctrl+C at start-up ------------------------------------------------------------------------
QUEUECTL = Path(sys.executable).with_name("queuectl")  # the installed command itself
CTRL_C_COMMANDS = [
    ("status",),
    ("list", "--json"),
    ("enqueue", '{"command": "true"}'),
    ("worker", "start"),
]


# Where Python itself catches a KeyboardInterrupt, reports it and goes on: checking argv[0],
# site reading a .pth file (an editable install's among them), and the import system's
# module-lock callback (a weakref callback, whose exceptions Python reports and ignores: a
# busy machine makes the interrupt land there now and then).
PYTHON_SWALLOWED = (
    "Failed checking if argv[0] is an import path entry",
    "Error processing line ",
    "Exception ignored in: <function _get_module_lock",
)


def _before_queuectl_ran(stderr: str) -> bool:
    """A traceback from before the command's first line ran: Python's own start-up (site's
    .pth files, the check of argv[0]) and the installed script's own first lines, out of any
    program's reach. Everything the command runs or imports has a frame of queuectl_tui under
    it, and a traceback from Python's exit says "Exception ignored"."""
    frames = [line for line in stderr.splitlines() if line.lstrip().startswith("File ")]
    return (
        "Exception ignored" not in stderr
        and "KeyboardInterrupt" in stderr
        and not any("queuectl_tui" in frame for frame in frames)
    )


_IMPORT_LOCK_REPORT = re.compile(
    r"Exception ignored in: <function _get_module_lock\.<locals>\.cb at 0x[0-9a-f]+>\n"
    r"Traceback \(most recent call last\):\n"
    r'(  File "<frozen importlib\._bootstrap>".*\n)+'
    r"KeyboardInterrupt: ?\n"
)


def _without_import_lock_report(stderr: str) -> str:
    """Stderr without Python's report of an interrupt that landed in its import system's
    module-lock callback, which Python ignores (the command then runs on): out of any
    program's reach, like the interrupts of its start-up."""
    return _IMPORT_LOCK_REPORT.sub("", stderr, count=1)


def test_the_package_root_imports_nothing_before_the_command_makes_ctrl_c_quiet() -> None:
    # The installed script imports the package root before its first line runs: each module
    # the root imports is a window in which a Ctrl+C prints a traceback.
    script = (
        "import sys, queuectl_tui\n"
        "print(sorted(name for name in sys.modules if name.startswith('queuectl_tui')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['queuectl_tui']"


@pytest.mark.slow
@pytest.mark.parametrize("command", CTRL_C_COMMANDS, ids=" ".join)
def test_ctrl_c_at_any_moment_of_start_up_exits_130_without_a_traceback(
    tmp_path: Path, cli_env: dict[str, str], command: tuple[str, ...]
) -> None:
    for step in range(21):
        delay = step * 0.015  # 0 to 300 ms after the exec
        proc = subprocess.Popen(
            [str(QUEUECTL), "--db", str(tmp_path / "q.db"), *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=cli_env,
            text=True,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            # Python's start-up swallowed it (it reports a KeyboardInterrupt while checking
            # argv[0] or reading a .pth file, and runs the script all the same): the pool
            # runs, and a second one stops it.
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
            assert stderr.startswith(PYTHON_SWALLOWED), f"after {delay:.3f} s:\n{stderr}"
        stderr = _without_import_lock_report(stderr)
        if _before_queuectl_ran(stderr):
            continue
        assert "Traceback" not in stderr, f"after {delay:.3f} s:\n{stderr}"
        # Killed before Python had a handler: the shell shows that as 130 too.
        assert proc.returncode in (0, 130, -signal.SIGINT), (delay, proc.returncode, stderr)


# Run as the installed command runs: its entry point loaded, then called; `typer` (imported
# only once the command loads) announces itself and then takes long enough to be hit.
_SLOW_IMPORT = """
import importlib.metadata, os, sys, time
slow = sys.argv[1]
class Slow:
    def find_spec(self, name, path=None, target=None):
        if name == slow:
            os.write(1, b"importing\\n")
            time.sleep(30)
        return None
sys.meta_path.insert(0, Slow())
sys.argv = ["queuectl", *sys.argv[2:]]
[entry] = importlib.metadata.entry_points(group="console_scripts", name="queuectl")
sys.exit(entry.load()())
"""


@pytest.mark.parametrize("module", ["typer", "queuectl_tui.engine.pool"])
def test_ctrl_c_while_the_command_imports_exits_130_without_a_traceback(
    tmp_path: Path, cli_env: dict[str, str], module: str
) -> None:
    command = ["--db", str(tmp_path / "q.db"), "worker", "start"]
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_IMPORT, module, *command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=cli_env,
        text=True,
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline() == "importing\n"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, stderr) == (130, "Interrupted.\n")
    assert not (tmp_path / "q.db").exists()  # nothing was started


def test_workers_that_ended_long_ago_are_shown_with_all(run_cli, db_path) -> None:
    from queuectl_tui.models import Worker, WorkerStatus
    from queuectl_tui.store import open_store

    with open_store(str(db_path)) as store:
        now = store.now()
        old = now - 3 * 3_600_000
        store.register_workers(
            [
                Worker("w-gone", "p", 9, "h", WorkerStatus.STOPPED, old, old, old, None, 0, 0),
                Worker("w-recent", "p", 9, "h", WorkerStatus.STOPPED, now, now, now, None, 0, 0),
            ]
        )
    shown = run_cli("workers", "--json")
    assert [worker["id"] for worker in json.loads(shown.stdout)] == ["w-recent"]
    every = run_cli("workers", "--all", "--json")
    assert sorted(worker["id"] for worker in json.loads(every.stdout)) == ["w-gone", "w-recent"]


def test_the_console_without_a_terminal_says_so_and_exits(run_cli) -> None:
    result = run_cli("dashboard", input="")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "Error: the console needs a terminal, and stdin or stdout is not one; for a browser "
        "run queuectl dashboard --addr 127.0.0.1:8080"
    )


def test_a_delay_in_the_job_or_on_the_command_line_sets_when_it_runs(
    run_cli: RunCli, tmp_path: Path
) -> None:
    assert run_cli("enqueue", '{"id":"own","command":"true","delay":"10m"}').returncode == 0
    assert run_cli("enqueue", '{"id":"flag","command":"true"}', "--delay", "2h").returncode == 0
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"id":"f1","command":"true"}\n{"id":"f2","command":"true","delay":5}\n')
    assert run_cli("enqueue", "--file", str(lines), "--delay", "1h").returncode == 0
    jobs = {job["id"]: job for job in json.loads(run_cli("list", "--json").stdout)}

    def waits(job_id: str) -> float:
        job = jobs[job_id]
        return (parse_iso(job["run_at"]) - parse_iso(job["created_at"])) / 1000

    assert [waits(j) for j in ("own", "flag", "f1", "f2")] == [600, 7200, 3600, 5]
    bad = run_cli("enqueue", '{"command":"true"}', "--delay", "later")
    assert bad.returncode == 2 and bad.stderr.startswith("Error: --delay: 'later' is not")
    assert len(json.loads(run_cli("list", "--json").stdout)) == 4  # nothing added


def test_a_job_gets_a_directory_and_an_environment_from_the_command_line(
    run_cli: RunCli, tmp_path: Path
) -> None:
    work = tmp_path / "cwd" / "reports"
    work.mkdir(parents=True)
    made = run_cli("enqueue", '{"id":"r","command":"make"}', "--cwd", "reports", "--env", "K=V")
    assert made.returncode == 0, made.stderr
    shown = json.loads(run_cli("show", "r", "--json").stdout)
    assert (shown["cwd"], shown["env"]) == (str(work), {"K": "V"})
    text = run_cli("show", "r").stdout
    assert "K=V" in text and str(work) in text
    own = run_cli("enqueue", '{"id":"o","command":"x","cwd":"/srv"}', "--cwd", "/elsewhere")
    assert (
        own.returncode == 0 and json.loads(run_cli("show", "o", "--json").stdout)["cwd"] == "/srv"
    )
    for args, said in (
        (["--env", "NOPE"], "--env takes NAME=VALUE"),
        (["--env", "QUEUECTL_X=1"], "--env: 'QUEUECTL_X' is not a name"),
    ):
        bad = run_cli("enqueue", '{"command":"true"}', *args)
        assert bad.returncode == 2 and said in bad.stderr, bad.stderr
    assert len(json.loads(run_cli("list", "--json").stdout)) == 2


def test_jobs_that_run_after_others_from_the_command_line(tmp_path: Path, run_cli: RunCli) -> None:
    assert run_cli("enqueue", '{"id":"a","command":"true"}').returncode == 0
    waiting = run_cli("enqueue", '{"id":"b","command":"true"}', "--after", "a")
    assert waiting.stdout == "Enqueued job b: waiting for the jobs it runs after\n"
    lines = tmp_path / "chain.jsonl"
    lines.write_text('{"id":"x","command":"true"}\n\n{"id":"y","command":"true","after":"z"}\n')
    refused = run_cli("enqueue", "--file", str(lines))
    assert refused.returncode == 2
    assert refused.stderr == (
        "Error: line 3: job 'y' cannot run after 'z': no such job was made before it\n"
    )
    assert json.loads(run_cli("list", "--json").stdout)[-1]["id"] == "b"  # nothing written
    shown = json.loads(run_cli("show", "b", "--json").stdout)
    assert shown["state"] == "waiting"
    assert shown["after"] == [{"id": "a", "state": "pending", "ended": None}]
    assert json.loads(run_cli("show", "a", "--json").stdout)["dependents"] == [
        {"id": "b", "state": "waiting"}
    ]
    assert run_cli("cancel", "a").returncode == 0
    late = run_cli("enqueue", '{"id":"c","command":"true"}', "--after", "a")
    assert late.stdout == (
        "Enqueued job c, cancelled at once: job 'a' it runs after ended cancelled\n"
    )


def test_short_options_mean_one_thing_in_every_command() -> None:
    import typer

    from queuectl_tui.cli.app import app

    meanings: dict[str, set[str]] = {}

    def walk(command: Any) -> None:
        for param in command.params:
            longs = sorted(o for o in param.opts if o.startswith("--"))
            for short in (o for o in param.opts if len(o) == 2 and o != "-h"):
                meanings.setdefault(short, set()).update(longs)
        for sub in getattr(command, "commands", {}).values():  # a group's commands
            walk(sub)

    walk(typer.main.get_command(app))
    assert meanings["-q"] == {"--queue"}
    # Where a letter means two things, each is that letter's convention where it is used (tail
    # -f and -n: logs --follow and --lines; enqueue -f FILE; worker start -c COUNT; schedule
    # add -c COMMAND; list -n LIMIT).
    assert {short for short, longs in meanings.items() if len(longs) > 1} <= {"-c", "-f", "-n"}


def test_an_interrupt_python_wraps_in_another_error_still_exits_130_quietly() -> None:
    # A Ctrl+C inside a class body's __set_name__ (a dataclass field, while a command's module
    # loads) reaches the command as a RuntimeError caused by the KeyboardInterrupt.
    script = (
        "import signal, queuectl_tui.cli.app as app, queuectl_tui.cli.entry as entry\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "def wrapped():\n"
        "    try:\n"
        "        raise KeyboardInterrupt\n"
        "    except KeyboardInterrupt as interrupt:\n"
        "        raise RuntimeError('Error calling __set_name__') from interrupt\n"
        "app.main = wrapped\n"
        "entry.main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stderr) == (130, "Interrupted.\n")


def test_shell_completion_script_and_answers(run_cli: RunCli, cli_env: dict[str, str]) -> None:
    script = run_cli("--show-completion", db=False)
    assert script.returncode == 0 and "_QUEUECTL_COMPLETE" in script.stdout, script.stderr
    cli_env.update(COMP_WORDS="queuectl dlq ", COMP_CWORD="2", _QUEUECTL_COMPLETE="complete_bash")
    answers = run_cli(db=False).stdout.split()
    assert {"list", "retry", "groups"} <= set(answers)
