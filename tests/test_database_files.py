"""The database file itself: damaged files, files of other applications, files that do not
exist yet, and the permissions of everything queuectl creates."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from queuectl_tui.store import ForeignDatabaseError, SQLiteStore, StoreBusyError, StoreCorrupt
from queuectl_tui.store.sqlite.schema import APPLICATION_ID, MIGRATIONS

from helpers import RunCli, clean_env, spec, wait_until

NOW = 1_700_000_000_000
READ_COMMANDS = (
    ("status",),
    ("status", "--json"),
    ("list",),
    ("list", "--json"),
    ("show", "j1"),
    ("workers",),
    ("dlq", "list"),
    ("stats",),
)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _siblings(path: Path) -> list[str]:
    """The files SQLite may put beside a database."""
    return [
        name
        for name in (path.name + "-wal", path.name + "-shm", path.name + "-journal")
        if (path.parent / name).exists()
    ]


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def _queue_with_jobs(path: Path, count: int = 200) -> None:
    store = SQLiteStore(path)
    for number in range(count):
        store.enqueue(spec(id=f"j{number}", command="echo " + "x" * 300), 3, NOW)
    store.close()  # the last connection checkpoints: everything is in the main file


def _overwrite_pages(path: Path, pages: range) -> None:
    """Random bytes over whole pages (page 1 holds the header and the schema)."""
    with sqlite3.connect(path) as conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    noise = random.Random(7)
    with open(path, "r+b") as handle:
        for page in pages:
            handle.seek((page - 1) * size)
            handle.write(noise.randbytes(size))


def _root_page(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()[0]
    finally:
        conn.close()


def _foreign_database(path: Path, application_id: int = 0) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
        "INSERT INTO users (name) VALUES ('ada'), ('grace');"
        f"PRAGMA application_id = {application_id};"
    )
    conn.close()


# -- a damaged database ------------------------------------------------------------------------
@pytest.mark.slow
def test_damaged_database_is_one_sentence_for_every_command(run_cli: RunCli, db_path: Path) -> None:
    _queue_with_jobs(db_path)
    pages = db_path.stat().st_size // 4096
    _overwrite_pages(db_path, range(2, pages + 1))
    commands = [
        *READ_COMMANDS,
        ("enqueue", '{"id":"new","command":"true"}'),
        ("dlq", "retry", "j1"),
    ]
    for command in commands:
        result = run_cli(*command)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        line = _one_line(result.stderr)
        assert str(db_path) in line and "PRAGMA integrity_check" in line, (command, line)


def test_a_file_that_is_not_a_database_is_one_sentence(run_cli: RunCli, db_path: Path) -> None:
    db_path.write_text("these are my notes, not a database\n" * 10)
    before = _sha256(db_path)
    for command in (("status",), ("list",), ("enqueue", '{"id":"a","command":"true"}')):
        result = run_cli(*command)
        assert result.returncode == 1, (command, result.stderr)
        line = _one_line(result.stderr)
        assert "not a database" in line and "PRAGMA integrity_check" in line
    assert _sha256(db_path) == before and _siblings(db_path) == []


@pytest.mark.slow
def test_pool_on_a_damaged_database_stops_with_one_sentence(run_cli: RunCli, db_path: Path) -> None:
    # The jobs table is damaged, the workers table is not: the pool starts, and its
    # dispatcher meets the damage at its first claim.
    _queue_with_jobs(db_path)
    _overwrite_pages(db_path, range(_root_page(db_path, "jobs"), _root_page(db_path, "jobs") + 1))
    result = run_cli("worker", "start", "--count", "2", "--log-format", "json")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    names = [json.loads(line)["event"] for line in lines if line.startswith("{")]
    assert "pool started" in names, names  # the damage was met by the running pool
    assert "worker replaced" not in names and "dispatcher error" not in names, names
    sentences = [line for line in lines if not line.startswith("{")]
    assert len(sentences) == 1, lines
    assert str(db_path) in sentences[0] and "PRAGMA integrity_check" in sentences[0]


def test_store_reports_damage_as_store_corrupt(db_path: Path) -> None:
    _queue_with_jobs(db_path, count=50)
    _overwrite_pages(db_path, range(_root_page(db_path, "jobs"), _root_page(db_path, "jobs") + 1))
    store = SQLiteStore(db_path)
    try:
        with pytest.raises(StoreCorrupt, match="integrity_check"):
            store.list_jobs()
        with pytest.raises(StoreCorrupt):
            store.enqueue(spec(id="x"), 3, NOW)
    finally:
        store.close()


# -- other applications' files -----------------------------------------------------------------
@pytest.mark.parametrize("application_id", [0, 1234])
def test_foreign_database_is_refused_untouched(
    run_cli: RunCli, tmp_path: Path, application_id: int
) -> None:
    other = tmp_path / "other-app.sqlite"
    _foreign_database(other, application_id)
    before = _sha256(other)
    for command in (
        ("status",),
        ("list", "--json"),
        ("enqueue", '{"id":"a","command":"true"}'),
        ("worker", "start", "--count", "1"),
    ):
        result = run_cli("--db", str(other), *command, db=False)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert "not a queuectl database" in _one_line(result.stderr)
        assert _sha256(other) == before, command
        assert _siblings(other) == [], command


def test_foreign_wal_database_is_refused_untouched(tmp_path: Path) -> None:
    other = tmp_path / "other-app.sqlite"
    _foreign_database(other)
    conn = sqlite3.connect(other)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    before = _sha256(other)
    with pytest.raises(ForeignDatabaseError, match="untouched"):
        SQLiteStore(other)
    assert _sha256(other) == before and _siblings(other) == []


def test_newer_schema_is_refused_before_its_header_changes(run_cli: RunCli, db_path: Path) -> None:
    SQLiteStore(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = _sha256(db_path)
    for command in (("status",), ("enqueue", '{"id":"a","command":"true"}')):
        result = run_cli(*command)
        assert result.returncode == 1
        assert "schema version 99" in _one_line(result.stderr)
    assert _sha256(db_path) == before and _siblings(db_path) == []
    assert db_path.read_bytes()[18:20] == b"\x01\x01"  # still a rollback journal, not WAL


def test_database_of_an_earlier_version_opens_and_is_stamped(
    run_cli: RunCli, db_path: Path
) -> None:
    conn = sqlite3.connect(db_path)
    conn.executescript(MIGRATIONS[0].script + "PRAGMA user_version = 1;")
    conn.execute(
        "INSERT INTO jobs (id, command, state, run_at, max_retries, created_at, updated_at) "
        "VALUES ('old', 'true', 'pending', 1, 3, 1, 1)"
    )
    conn.execute("UPDATE state_counts SET n = 1 WHERE state = 'pending'")
    conn.commit()
    assert conn.execute("PRAGMA application_id").fetchone()[0] == 0
    conn.close()
    listed = run_cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [job["id"] for job in json.loads(listed.stdout)] == ["old"]
    assert run_cli("enqueue", '{"id":"new","command":"true"}').returncode == 0
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()


def test_new_database_is_stamped(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    assert int.from_bytes(db_path.read_bytes()[68:72], "big") == APPLICATION_ID


def test_empty_file_becomes_a_queue(run_cli: RunCli, db_path: Path) -> None:
    db_path.touch()
    assert run_cli("status").returncode == 0
    assert db_path.stat().st_size == 0  # a read leaves it alone
    assert run_cli("enqueue", '{"id":"a","command":"true"}').returncode == 0
    assert json.loads(run_cli("list", "--json").stdout)[0]["id"] == "a"


# -- a database that does not exist yet --------------------------------------------------------
@pytest.mark.slow
def test_read_commands_do_not_create_the_database(run_cli: RunCli, db_path: Path) -> None:
    for command in READ_COMMANDS:
        result = run_cli(*command)
        assert not db_path.exists() and _siblings(db_path) == [], command
        assert "Traceback" not in result.stderr, command
        if command[0] == "show":
            assert result.returncode == 1 and "j1" in _one_line(result.stderr)
        else:  # the empty queue it answers from is said on stderr
            note = (
                f"note: there is no queue at {db_path} yet (the first enqueue or pool makes it)\n"
            )
            assert result.returncode == 0 and result.stderr == note, (command, result.stderr)
    assert json.loads(run_cli("list", "--json").stdout) == []
    assert json.loads(run_cli("status", "--json").stdout)["total"] == 0
    assert run_cli("enqueue", '{"id":"a","command":"true"}').returncode == 0
    assert db_path.exists()


def test_a_reader_opened_before_the_database_existed_sees_it_later(db_path: Path) -> None:
    from queuectl_tui import service
    from queuectl_tui.config import Settings

    reader = service.open_queue(Settings(database=str(db_path)))  # as the console does
    try:
        assert reader.list_jobs() == [] and reader.counts()
        assert not db_path.exists()
        writer = SQLiteStore(db_path)
        writer.enqueue(spec(id="later"), 3, NOW)
        writer.close()
        assert [job.id for job in reader.list_jobs()] == ["later"]
    finally:
        reader.close()


def test_first_write_of_a_deferred_store_creates_the_database(db_path: Path) -> None:
    store = SQLiteStore(db_path, create_at_open=False)
    try:
        assert store.get("a") is None and not db_path.exists()
        store.enqueue(spec(id="a"), 3, NOW)
        assert db_path.exists()
    finally:
        store.close()
    reopened = SQLiteStore(db_path)
    assert reopened.get("a") is not None
    reopened.close()


# -- lock waits ----------------------------------------------------------------------------------
def _hold_write_lock(db_path: Path, seconds: float, marker: Path) -> subprocess.Popen[bytes]:
    code = (
        "import sqlite3, sys, time, pathlib\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('BEGIN IMMEDIATE')\n"
        "pathlib.Path(sys.argv[3]).write_text('held')\n"
        "time.sleep(float(sys.argv[2]))\n"
        "conn.execute('COMMIT')\n"
    )
    return subprocess.Popen([sys.executable, "-c", code, str(db_path), str(seconds), str(marker)])


def _wait_for(marker: Path, holder: subprocess.Popen[bytes]) -> None:
    import time

    deadline = time.monotonic() + 30
    while not marker.exists():
        assert holder.poll() is None and time.monotonic() < deadline, "the lock was not taken"
        time.sleep(0.02)


@pytest.mark.slow
def test_enqueue_that_waits_for_the_lock_prints_nothing_on_stderr(
    run_cli: RunCli, db_path: Path, tmp_path: Path
) -> None:
    SQLiteStore(db_path).close()
    marker = tmp_path / "held"
    # Longer than the 5 s busy timeout, so that the store's own retries are needed.
    holder = _hold_write_lock(db_path, 6.5, marker)
    try:
        _wait_for(marker, holder)
        result = run_cli("enqueue", '{"id":"patient","command":"true"}')
    finally:
        holder.wait(timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "patient" in result.stdout


def test_a_lock_that_outlasts_every_retry_is_one_sentence(db_path: Path, tmp_path: Path) -> None:
    SQLiteStore(db_path).close()
    marker = tmp_path / "held"
    holder = _hold_write_lock(db_path, 3.0, marker)
    try:
        _wait_for(marker, holder)
        store = SQLiteStore(db_path, busy_timeout=0.05, lock_retry_seconds=0.2)
        with pytest.raises(StoreBusyError, match="stayed locked") as raised:
            store.enqueue(spec(id="a"), 3, NOW)
        store.close()
    finally:
        holder.wait(timeout=60)
    assert "\n" not in str(raised.value)


# -- permissions -------------------------------------------------------------------------------
def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _umask_022() -> None:
    os.umask(0o022)


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queuectl_tui", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=60,
        preexec_fn=_umask_022,
    )


@pytest.mark.slow
@pytest.mark.parametrize(("setting", "expected"), [(None, 0o600), ("660", 0o660)])
def test_files_get_the_file_mode_under_umask_022(
    tmp_path: Path, setting: str | None, expected: int
) -> None:
    config = tmp_path / "config.json"
    base = ["--config", str(config), "--db", str(tmp_path / "q.db")]
    if setting is not None:
        assert _cli(tmp_path, *base, "config", "set", "file-mode", setting).returncode == 0
    else:
        config.write_text("{}")
    db = tmp_path / "q.db"
    started = _cli(tmp_path, *base, "worker", "start", "--detach", "--count", "1")
    assert started.returncode == 0, started.stderr
    try:
        log = tmp_path / "q.db.workers.log"
        wait_until(lambda: db.exists() and log.exists(), timeout=30, what="the pool's files")
        enqueued = _cli(tmp_path, *base, "enqueue", '{"id":"a","command":"echo secret"}')
        assert enqueued.returncode == 0, enqueued.stderr
        # While the pool holds its connections, the -wal and -shm files exist.
        wait_until(lambda: (tmp_path / "q.db-wal").exists(), timeout=30, what="the -wal file")
        wait_until(lambda: (tmp_path / "q.db-shm").exists(), timeout=30, what="the -shm file")
        files = ("q.db-wal", "q.db-shm", "q.db-lock")
        for path in (db, *(tmp_path / name for name in files), log):
            assert _mode(path) == expected, (path.name, oct(_mode(path)))
    finally:
        stopped = _cli(tmp_path, *base, "worker", "stop", "--wait", "--timeout", "30")
        assert stopped.returncode == 0, stopped.stderr


@pytest.mark.slow
def test_a_pool_remakes_a_missing_lock_file_with_the_file_mode(tmp_path: Path) -> None:
    # A queue copied or restored without its lock file: whichever of the pool's threads
    # makes it first, it gets the mode the pool was given.
    config = tmp_path / "config.json"
    base = ["--config", str(config), "--db", str(tmp_path / "q.db")]
    assert _cli(tmp_path, *base, "config", "set", "file-mode", "660").returncode == 0
    assert _cli(tmp_path, *base, "enqueue", '{"id":"a","command":"true"}').returncode == 0
    lock = tmp_path / "q.db-lock"
    lock.unlink()
    started = _cli(tmp_path, *base, "worker", "start", "--detach", "--count", "1")
    assert started.returncode == 0, started.stderr
    try:
        wait_until(lock.exists, timeout=30, what="the lock file")
        assert _mode(lock) == 0o660, oct(_mode(lock))
    finally:
        stopped = _cli(tmp_path, *base, "worker", "stop", "--wait", "--timeout", "30")
        assert stopped.returncode == 0, stopped.stderr


def test_an_existing_database_keeps_its_mode(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    SQLiteStore(db).close()
    db.chmod(0o640)
    assert _cli(tmp_path, "--db", str(db), "enqueue", '{"id":"a","command":"true"}').returncode == 0
    assert _mode(db) == 0o640


def test_a_symlink_at_the_log_path_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    SQLiteStore(db).close()
    target = tmp_path / "elsewhere.txt"
    (tmp_path / "q.db.workers.log").symlink_to(target)
    result = _cli(tmp_path, "--db", str(db), "worker", "start", "--detach")
    assert result.returncode == 1
    assert "symbolic link" in _one_line(result.stderr)
    assert not target.exists()


def test_the_change_token_moves_when_the_database_appears(db_path: Path) -> None:
    reader = SQLiteStore(db_path, create_at_open=False)
    try:
        before = reader.change_token()
        SQLiteStore(db_path).close()
        assert reader.change_token() != before
    finally:
        reader.close()


async def test_the_console_on_a_missing_database_creates_nothing(db_path: Path) -> None:
    from queuectl_tui.config import Settings
    from queuectl_tui.tui.app import QueueConsole

    console = QueueConsole(Settings(database=str(db_path)))
    async with console.run_test() as pilot:
        for key in ("2", "3", "1"):  # every pane reads
            await pilot.press(key)
            await pilot.pause(0.2)
        assert console.reads > 0
    assert not db_path.exists() and _siblings(db_path) == []


def test_a_dangling_symlink_at_the_database_path_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "planted.db"
    target.parent.mkdir()
    link = tmp_path / "q.db"
    link.symlink_to(target)
    result = _cli(tmp_path, "--db", str(link), "enqueue", '{"id":"a","command":"true"}')
    assert result.returncode == 1
    assert "symbolic link" in _one_line(result.stderr)
    assert not target.exists()


def test_a_detached_pool_on_a_missing_folder_is_refused_and_makes_no_folder(
    tmp_path: Path,
) -> None:
    result = _cli(tmp_path, "--db", "missing/q.db", "worker", "start", "--detach")
    assert result.returncode == 1
    assert "folder for the database does not exist" in _one_line(result.stderr)
    assert not (tmp_path / "missing").exists()


SYMLINK_LOOP_COMMANDS = (
    *READ_COMMANDS,
    ("enqueue", '{"id":"a","command":"true"}'),
    ("worker", "start"),
    ("worker", "start", "--detach"),
    ("worker", "stop"),
    ("cancel", "j1"),
    ("retry", "j1"),
    ("delete", "j1"),
    ("dlq", "retry", "--all"),
    ("prune", "--state", "completed", "--older-than", "1d"),
    ("queue", "list"),
    ("queue", "pause", "reports"),
    ("audit",),
    ("metrics",),
    ("dashboard",),
)


@pytest.mark.parametrize("command", SYMLINK_LOOP_COMMANDS, ids=" ".join)
def test_a_symlink_loop_at_the_database_path_is_one_sentence(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    (tmp_path / "loop.db").symlink_to("loop.db")
    result = _cli(tmp_path, "--db", "loop.db", *command)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "symbolic links" in _one_line(result.stderr)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["loop.db"]  # nothing made


async def test_the_console_on_a_damaged_database_closes_and_names_the_damage(
    db_path: Path,
) -> None:
    from queuectl_tui.config import Settings
    from queuectl_tui.tui.app import QueueConsole

    _queue_with_jobs(db_path)
    jobs_root = _root_page(db_path, "jobs")  # the schema stays readable: the console opens
    _overwrite_pages(db_path, range(jobs_root, jobs_root + 1))

    console = QueueConsole(Settings(database=str(db_path)))
    async with console.run_test() as pilot:
        deadline = time.monotonic() + 30
        while console.fatal is None and time.monotonic() < deadline:
            await pilot.pause(0.05)
    assert console.fatal is not None and console.return_code == 1
    assert str(db_path) in str(console.fatal) and "PRAGMA integrity_check" in str(console.fatal)
