"""Hostile input to enqueue, show, dlq retry and the config file: each is either accepted and
stored exactly, or refused with one sentence on stderr, exit 2 and nothing written. Never a
traceback."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from queuectl_tui.cli.app import app
from queuectl_tui.config import SETTINGS
from queuectl_tui.models import JOB_FIELDS
from queuectl_tui.timeutil import parse_iso

from helpers import RunCli, clean_env

# Deep enough for any recursion limit, short enough for one argument (128 KiB on Linux).
DEEP_ARRAY = "[" * 30_000 + "]" * 30_000
DEEP_OBJECT = '{"a":' * 10_000 + "1" + "}" * 10_000
HUGE_INT = "9" * 5000
JOB = '{"command": "true"}'


def job_rows(db_path: Path) -> list[tuple[Any, ...]]:
    """The stored jobs in creation order; none when the database was never created."""
    if not db_path.exists():
        return []
    with sqlite3.connect(db_path) as conn:
        return conn.execute(
            "SELECT id, command, priority, run_at, max_retries, timeout, idempotency_key "
            "FROM jobs ORDER BY seq"
        ).fetchall()


def run_raw(
    db_path: Path, *args: str | bytes, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    """The real CLI with raw bytes in argv and on stdin, as a shell would pass them."""
    return subprocess.run(
        [sys.executable, "-m", "queuectl_tui", "--db", str(db_path), *args],
        input=stdin,  # never the test runner's own stdin
        capture_output=True,
        env=clean_env(),
        cwd=db_path.parent,
        timeout=60,
    )


def assert_refused(result: Any, db_path: Path, words: str = "") -> None:
    stderr = result.stderr if isinstance(result.stderr, str) else result.stderr.decode()
    assert result.returncode == 2, stderr
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert stderr.startswith("Error: ")
    assert words in stderr
    assert job_rows(db_path) == []


# -- the repros, as real processes -------------------------------------------------------------


@pytest.mark.parametrize(
    "run_at", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "0001-01-01T23:59:59Z"]
)
def test_run_at_outside_the_supported_range_is_refused(
    run_cli: RunCli, db_path: Path, run_at: str
) -> None:
    result = run_cli("enqueue", json.dumps({"command": "true", "run_at": run_at}))
    assert_refused(result, db_path, "'run_at' must be between 0001-01-02 and 9999-12-30")


def test_run_at_at_the_edges_of_the_range_is_accepted(run_cli: RunCli, db_path: Path) -> None:
    lines = [
        json.dumps({"id": "first", "command": "true", "run_at": "0001-01-02T00:00:00Z"}),
        json.dumps({"id": "last", "command": "true", "run_at": "9999-12-30T23:59:59.999Z"}),
        json.dumps({"id": "east", "command": "true", "run_at": "9999-12-31T09:59:59+14:00"}),
    ]
    result = run_cli("enqueue", "--file", "-", input="\n".join(lines))
    assert result.returncode == 0, result.stderr
    listed = {job["id"]: job["run_at"] for job in json.loads(run_cli("list", "--json").stdout)}
    assert listed == {
        "first": "0001-01-02T00:00:00.000Z",
        "last": "9999-12-30T23:59:59.999Z",
        "east": "9999-12-30T19:59:59.000Z",
    }
    assert run_cli("show", "last").returncode == 0


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        (DEEP_ARRAY, "nested too deeply"),
        ('{"command": ' + DEEP_OBJECT + "}", "nested too deeply"),
        ('{"command": "\\ud800"}', "'command' is not valid UTF-8"),
        ('{"command": "x", "id": "\\udcff"}', "'id'"),
        ('{"command": "x", "priority": ' + HUGE_INT + "}", "'priority' must be between"),
        ('{"command": "x", "max_retries": -' + HUGE_INT + "}", "'max_retries' must be between"),
        ('{"command": "x", "timeout": ' + HUGE_INT + "}", "'timeout'"),
        ('{"command": "x", "colour": ' + HUGE_INT + "}", "unknown field 'colour'"),
    ],
    ids=[
        "deep-array",
        "deep-object",
        "surrogate",
        "surrogate-id",
        "huge-priority",
        "huge-retries",
        "huge-timeout",
        "huge-unknown",
    ],
)
def test_hostile_argument_is_one_sentence(
    run_cli: RunCli, db_path: Path, payload: str, words: str
) -> None:
    assert_refused(run_cli("enqueue", payload), db_path, words)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (DEEP_ARRAY, "line 2: invalid JSON: values nested too deeply"),
        ('{"command": "\\ud800"}', "line 2: field 'command' is not valid UTF-8"),
        ('{"command": "x", "priority": ' + HUGE_INT + "}", "line 2: field 'priority'"),
    ],
    ids=["deep", "surrogate", "huge-priority"],
)
def test_hostile_file_line_is_one_sentence(
    run_cli: RunCli, db_path: Path, tmp_path: Path, line: str, words: str
) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"command": "true"}\n' + line + "\n", encoding="utf-8")
    assert_refused(run_cli("enqueue", "--file", str(jobs)), db_path, words)
    assert_refused(run_cli("enqueue", "--file", "-", input=jobs.read_text()), db_path, words)


@pytest.mark.parametrize(
    "text",
    [DEEP_ARRAY, '{"max_retries": ' + HUGE_INT + "}", '{"kill_grace": ' + DEEP_OBJECT],
    ids=["deep-array", "huge-int", "deep-object"],
)
def test_hostile_config_file_is_one_sentence(tmp_path: Path, text: str) -> None:
    db_path = tmp_path / "queue.db"
    (tmp_path / "config.json").write_text(text, encoding="utf-8")
    result = run_raw(db_path, "enqueue", '{"command": "true"}')
    assert_refused(result, db_path, "config file config.json")


def test_bytes_that_are_not_utf8_in_argv(db_path: Path) -> None:
    assert_refused(run_raw(db_path, "enqueue", b'{"command": "echo \xff"}'), db_path, "'command'")
    assert_refused(run_raw(db_path, "enqueue", b'{"command": "x", "id": "\xff"}'), db_path, "'id'")
    # Not JSON, so a command as typed: refused for its bytes.
    assert_refused(
        run_raw(db_path, "enqueue", b"\xff\xfe"), db_path, "'command' is not valid UTF-8"
    )
    assert_refused(run_raw(db_path, "show", b"job\xff"), db_path, "not valid UTF-8")
    assert_refused(run_raw(db_path, "dlq", "retry", "a", b"\xc3("), db_path, "not valid UTF-8")


def test_bytes_that_are_not_utf8_on_stdin(db_path: Path) -> None:
    stdin = b'{"command": "true"}\n{"command": "echo \xff"}\n'
    result = run_raw(db_path, "enqueue", "--file", "-", stdin=stdin)
    assert_refused(result, db_path, "stdin is not valid UTF-8")
    jobs = db_path.parent / "jobs.jsonl"
    jobs.write_bytes(stdin)
    assert_refused(run_raw(db_path, "enqueue", "--file", str(jobs)), db_path, "not valid UTF-8")


def test_file_lines_split_at_newlines_only(run_cli: RunCli, db_path: Path) -> None:
    # JSON allows these raw in a string; they must not end the line.
    commands = ["echo a\u2028b", "echo c\x85d", "echo e\x1cf"]
    lines = [json.dumps({"command": c}, ensure_ascii=False) for c in commands]
    lines[2] = lines[2].replace("\\u001c", "\x1c")  # invalid JSON: a raw control character
    result = run_cli("enqueue", "--file", "-", input="\r\n".join(lines[:2]) + "\r\n")
    assert result.returncode == 0, result.stderr
    assert [row[1] for row in job_rows(db_path)] == commands[:2]
    assert run_cli("enqueue", "--file", "-", input=lines[2]).returncode == 2


# -- the fuzz test, in-process ------------------------------------------------------------------

HOSTILE_STRINGS = [
    "",
    " ",
    "\x00",
    "\ud800",
    "\udcff",
    "\u202e",
    "\x9b",
    "\u2028",
    "\x85",
    "a\nb",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "9999-12-30T23:59:59.999Z",
    "0001-01-02T00:00:00Z",
    "2026-01-01T00:00:00+05:30",
    "x" * 201,
]
RAW_VALUES = [
    HUGE_INT,
    "-" + HUGE_INT,
    "1" + "0" * 4300,
    "1e999",
    "-1e999",
    "NaN",
    "Infinity",
    "null",
    "true",
    "[]",
    "{}",
    DEEP_ARRAY,
    DEEP_OBJECT,
    "[" * 50,
]


def _string_text(value: str, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)


json_strings = st.builds(
    _string_text,
    st.one_of(st.text(max_size=30), st.sampled_from(HOSTILE_STRINGS)),
    st.booleans(),
)
json_values = st.one_of(
    json_strings,
    st.integers().map(str),
    st.integers(min_value=-5, max_value=120).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(json.dumps),
    st.sampled_from(RAW_VALUES),
)
field_names = st.one_of(st.sampled_from(JOB_FIELDS), st.sampled_from(["colour", "", "\ud800"]))
printable_text = st.text(st.characters(categories=["L", "N", "P", "S", "Zs"]), min_size=1)
PLAUSIBLE: dict[str, st.SearchStrategy[str]] = {
    "id": printable_text.map(json.dumps),
    "command": st.text(min_size=1, max_size=40).map(lambda c: json.dumps(c, ensure_ascii=False)),
    "priority": st.integers(-(2**31), 2**31).map(str),
    "run_at": st.datetimes().map(lambda d: json.dumps(d.isoformat() + "Z")),
    "max_retries": st.integers(-1, 101).map(str),
    "timeout": st.floats(0, 700_000).map(json.dumps),
    "idempotency_key": printable_text.map(json.dumps),
}


def _value_for(draw: st.DrawFn, name: str) -> str:
    if name in PLAUSIBLE and draw(st.integers(0, 3)) > 0:
        return draw(PLAUSIBLE[name])
    return draw(json_values)


@st.composite
def job_texts(draw: st.DrawFn) -> str:
    """The JSON text of one job object, built as text so that it can hold what json.dumps
    cannot write (5,000-digit numbers, raw surrogates, deep nesting)."""
    pairs: dict[str, str] = {}
    if draw(st.integers(0, 9)) > 0:
        pairs["command"] = _value_for(draw, "command")
    for name in draw(st.lists(field_names, max_size=4)):
        pairs[name] = _value_for(draw, name)
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in pairs.items()) + "}"


whole_inputs = st.one_of(
    job_texts(),
    job_texts(),
    st.text(max_size=40),
    st.sampled_from([DEEP_ARRAY, HUGE_INT, "\udcff", '{"command": "x"} {"command": "y"}']),
)


def _decoded(text: str) -> Any:
    """What the test expects the CLI to have read, or None for text it must refuse anyway
    (it is not JSON to Python either)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _assert_stored_exactly(row: tuple[Any, ...], job: dict[str, Any]) -> None:
    job_id, command, priority, run_at, max_retries, timeout, key = row
    assert command == job["command"]
    if job.get("id") is not None:
        assert job_id == job["id"]
    assert priority == (job.get("priority") or 0)
    if job.get("run_at") is not None:
        assert run_at == parse_iso(job["run_at"])
    assert max_retries == (3 if job.get("max_retries") is None else job["max_retries"])
    assert timeout == job.get("timeout")
    assert key == job.get("idempotency_key")


def _invoke(args: list[str], stdin: bytes | None = None) -> Any:
    result = CliRunner().invoke(app, args, input=stdin)
    # A traceback in-process is an exception other than the SystemExit of a clean exit.
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}"
    )
    setattr(result, "returncode", result.exit_code)  # noqa: B010  # as subprocess names it
    return result


def _check_outcome(result: Any, db_path: Path, jobs: list[Any] | None) -> None:
    if result.returncode == 0:
        assert jobs is not None and all(isinstance(job, dict) for job in jobs)
        seen_keys: set[str] = set()
        expected = []
        for job in jobs:  # a repeated idempotency key is skipped, not stored twice
            key = job.get("idempotency_key")
            if key is None or key not in seen_keys:
                expected.append(job)
            seen_keys.add(key)
        rows = job_rows(db_path)
        assert len(rows) == len(expected)
        for row, job in zip(rows, expected, strict=True):
            _assert_stored_exactly(row, job)
    else:
        assert_refused(result, db_path)


FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _command_stored(text: str) -> bool:
    """Whether a command typed as one word is one the validator keeps."""
    if not text or text.isspace() or "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _read_as_json(word: str) -> bool:
    """The argument's form, as the CLI documents it: an object (even a broken one), or text
    that is a JSON array; anything else is a command."""
    start = word.lstrip()
    if start.startswith("{"):
        return True
    try:
        json.loads(word)
    except RecursionError:  # JSON, too deep for the decoder
        return start.startswith("[")
    except ValueError:
        return False
    return start.startswith("[")


@FUZZ
@given(text=whole_inputs.filter(lambda text: not text.startswith("-")))
def test_fuzz_enqueue_argument(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db_path = Path(folder) / "queue.db"
        result = _invoke(["--db", str(db_path), "enqueue", text])
        if _read_as_json(text):
            decoded = _decoded(text)
            _check_outcome(result, db_path, None if decoded is None else [decoded])
        elif _command_stored(text):
            assert result.returncode == 0, result.output
            [row] = job_rows(db_path)
            assert row[1] == text
        else:
            assert_refused(result, db_path)


def _document(text: str) -> list[Any] | None:
    """The jobs of an input as the CLI documents its forms, or None for one it must refuse:
    a JSON array; objects written across lines (the first line opens one it does not close);
    else JSON Lines (lines end at "\n" only: a generated line may hold one, or end in "\r")."""
    if text.lstrip().startswith("["):
        whole = _decoded(text)
        return whole if isinstance(whole, list) else None
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    first = next((line.strip() for line in lines if line.strip()), "")
    if first.startswith("{") and _decoded(first) is None:
        try:
            json.loads(first)
        except json.JSONDecodeError as error:
            across_lines = error.pos >= len(first)
        except (ValueError, RecursionError):  # too deep, or a number too long: refused anyway
            across_lines = False
        if across_lines:
            decoder, at = json.JSONDecoder(), 0
            values: list[Any] = []
            while True:
                while at < len(text) and text[at].isspace():
                    at += 1
                if at == len(text):
                    return values
                try:
                    value, at = decoder.raw_decode(text, at)
                except (ValueError, RecursionError):
                    return None
                values.append(value)
    decoded = [_decoded(line) for line in lines if line.strip()]
    return None if any(job is None for job in decoded) else decoded


@FUZZ
@given(lines=st.lists(whole_inputs, min_size=1, max_size=4), from_stdin=st.booleans())
def test_fuzz_enqueue_file(lines: list[str], from_stdin: bool) -> None:
    data = "\n".join(lines).encode("utf-8", "surrogatepass")  # raw surrogates: not UTF-8
    with tempfile.TemporaryDirectory() as folder:
        db_path = Path(folder) / "queue.db"
        if from_stdin:
            result = _invoke(["--db", str(db_path), "enqueue", "--file", "-"], stdin=data)
        else:
            jobs_file = Path(folder) / "jobs.jsonl"
            jobs_file.write_bytes(data)
            result = _invoke(["--db", str(db_path), "enqueue", "--file", str(jobs_file)])
        decoded = _document("\n".join(lines)) or []
        # Ids as JSON text: a generated id may be a list or an object, which sets cannot hold.
        ids = [json.dumps(job["id"]) for job in decoded if isinstance(job, dict) and "id" in job]
        ids = [i for i in ids if i != "null"]
        if _document("\n".join(lines)) is None or len(set(ids)) < len(ids):
            decoded = []  # not JSON, or an id repeated: must be refused
            if result.returncode == 0:
                pytest.fail(f"accepted: {lines!r}")
        _check_outcome(result, db_path, decoded)


setting_names = st.one_of(st.sampled_from([s.key for s in SETTINGS]), st.text(max_size=10))
config_values = st.one_of(json_values, st.integers(0, 100).map(str), st.floats(0.5, 50).map(str))


@st.composite
def config_texts(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 4)) == 0:
        return draw(st.one_of(st.sampled_from(RAW_VALUES), st.text(max_size=30)))
    pairs = {draw(setting_names): draw(config_values) for _ in range(draw(st.integers(0, 3)))}
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in pairs.items()) + "}"


@FUZZ
@given(text=config_texts())
def test_fuzz_config_file(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db_path = Path(folder) / "queue.db"
        config = Path(folder) / "config.json"
        config.write_bytes(text.encode("utf-8", "surrogatepass"))
        result = _invoke(["--db", str(db_path), "--config", str(config), "enqueue", JOB])
        if result.returncode == 0:
            assert [row[1] for row in job_rows(db_path)] == ["true"]
        else:
            assert_refused(result, db_path)


def test_a_limit_beyond_sqlite_integers_means_every_row(run_cli: RunCli) -> None:
    assert run_cli("enqueue", '{"id": "job-1", "command": "true"}').returncode == 0
    huge = str(10**30)
    for args in [
        ("list", "--limit", huge),
        ("list", "--json", "-n", huge),
        ("dlq", "list", "-n", huge),
    ]:
        result = run_cli(*args)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result.stderr)
    assert [job["id"] for job in json.loads(run_cli("list", "--json", "-n", huge).stdout)] == [
        "job-1"
    ]
