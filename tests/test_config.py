from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from queuectl_tui.config import SETTINGS, ConfigError, load_settings, setting_spec, write_setting

from helpers import clean_env


def test_defaults_without_any_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(env={})
    assert settings.database == "queue.db"
    assert (settings.max_retries, settings.backoff_base, settings.stale_worker_timeout) == (
        3,
        2,
        15,
    )
    assert settings.default_workers == 1 and settings.config_file is None


def test_precedence_defaults_file_env_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("config.json").write_text(json.dumps({"database_path": "from-file.db", "max_retries": 5}))
    from_file = load_settings(env={})
    assert from_file.database == "from-file.db" and from_file.max_retries == 5
    from_env = load_settings(env={"QUEUECTL_DB": "env.db"})
    assert from_env.database == "env.db" and from_env.max_retries == 5
    from_flag = load_settings(db_path="flag.db", env={"QUEUECTL_DB": "env.db"})
    assert from_flag.database == "flag.db"


def test_explicit_config_file_and_relative_database(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "q.json").write_text(json.dumps({"database_path": "jobs.db"}))
    settings = load_settings(config_path=str(folder / "q.json"), env={})
    assert Path(settings.database) == folder / "jobs.db"
    via_env = load_settings(env={"QUEUECTL_CONFIG": str(folder / "q.json")})
    assert via_env.database == settings.database


def test_seed_names_are_understood(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"default_retries": 4, "stale_worker_timeout_seconds": 30}))
    settings = load_settings(config_path=str(path), env={})
    assert settings.max_retries == 4 and settings.stale_worker_timeout == 30


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"max_retries": -1}', "at least 0"),
        ('{"max_retries": "many"}', "integer"),
        ('{"colour": "blue"}', "unknown setting 'colour'"),
        ('{"heartbeat_interval": 20}', "shorter than stale-worker-timeout"),
    ],
)
def test_broken_config_files_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_settings(config_path=str(path), env={})


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(config_path=str(tmp_path / "none.json"), env={})


def test_write_setting_validates_and_keeps_other_keys(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"database_path": "x.db"}))
    spec, value = write_setting(path, "backoff-base", "3")
    assert (spec.key, value) == ("backoff_base", 3.0)
    assert json.loads(path.read_text()) == {"database_path": "x.db", "backoff_base": 3.0}
    with pytest.raises(ConfigError, match="valid settings: database, max-retries"):
        write_setting(path, "nope", "1")
    with pytest.raises(ConfigError, match="at least 1"):
        write_setting(path, "backoff-base", "0.5")
    with pytest.raises(ConfigError, match="integer"):
        write_setting(path, "max-retries", "2.5")
    assert json.loads(path.read_text()) == {"database_path": "x.db", "backoff_base": 3.0}
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [".c.json.lock", "c.json"]  # no temp files left, only the lock file


def test_setting_names_accept_both_spellings() -> None:
    assert setting_spec("max-retries") is setting_spec("max_retries")


def test_write_setting_checks_intervals_against_the_file_under_its_old_names(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"stale_worker_timeout_seconds": 3}')
    with pytest.raises(ConfigError, match="shorter than stale-worker-timeout"):
        write_setting(path, "heartbeat-interval", "5")
    assert json.loads(path.read_text()) == {"stale_worker_timeout_seconds": 3}
    write_setting(path, "heartbeat-interval", "1")
    assert load_settings(config_path=str(path), env={}).heartbeat_interval == 1


# -- concurrent writers and file modes ---------------------------------------------------------
_AT_ONCE = """
import os, sys, time
from pathlib import Path
from queuectl_tui.cli.app import app
ready, go, args = sys.argv[1], sys.argv[2], sys.argv[3:]
Path(ready).touch()
while not os.path.exists(go):
    time.sleep(0.002)
sys.argv = ["queuectl", *args]
app()
"""


def _round_values(number: int) -> dict[str, str]:
    """One distinct, valid value per setting (the heartbeat stays below the stale timeout)."""
    return {
        "database": f"round-{number}.db",
        "max-retries": str(number + 1),
        "backoff-base": str(2 + number),
        "max-backoff": str(100 + number),
        "job-timeout": str(10 + number),
        "stale-worker-timeout": str(30 + number),
        "heartbeat-interval": str(1 + number),
        "default-workers": str(1 + number),
        "output-limit": str(1000 + number),
        "kill-grace": str(1 + number),
        "file-mode": ("600", "660")[number % 2],
    }


def _set_all_at_once(config: Path, values: dict[str, str], folder: Path) -> None:
    go = folder / "go"
    go.unlink(missing_ok=True)
    writers = []
    for index, (key, value) in enumerate(values.items()):
        ready = folder / f"ready-{index}"
        ready.unlink(missing_ok=True)
        args = [str(ready), str(go), "--config", str(config), "config", "set", key, value]
        writers.append(
            (
                ready,
                subprocess.Popen(
                    [sys.executable, "-c", _AT_ONCE, *args],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=clean_env(),
                ),
            )
        )
    deadline = time.monotonic() + 60
    while not all(ready.exists() for ready, _ in writers):
        assert time.monotonic() < deadline, "the writers did not start"
        time.sleep(0.01)
    go.touch()  # every writer reads, changes and writes the file at the same moment
    for _, writer in writers:
        out, err = writer.communicate(timeout=60)
        assert writer.returncode == 0 and "saved" in out, err


@pytest.mark.slow
def test_concurrent_config_set_keeps_every_setting(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    for number in range(3):
        values = _round_values(number)
        _set_all_at_once(config, values, tmp_path)
        stored = json.loads(config.read_text())
        lost = {
            key: value
            for key, value in values.items()
            if str(stored.get(key.replace("-", "_"))) not in (value, f"{value}.0")
        }
        assert lost == {}, f"round {number}: settings lost: {lost}"


def _set_under_umask_022(config: Path, key: str, value: str) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "queuectl_tui",
            "--config",
            str(config),
            "config",
            "set",
            key,
            value,
        ],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        preexec_fn=lambda: os.umask(0o022),
    )
    assert result.returncode == 0, result.stderr


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_config_file_is_private_and_an_existing_one_keeps_its_mode(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    _set_under_umask_022(config, "max-retries", "5")
    assert _mode(config) == 0o600
    config.chmod(0o644)  # the owner chose to share it
    _set_under_umask_022(config, "backoff-base", "3")
    assert _mode(config) == 0o644
    assert json.loads(config.read_text()) == {"max_retries": 5, "backoff_base": 3.0}


def test_a_new_config_file_that_shares_with_the_group_is_0660(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    _set_under_umask_022(config, "file-mode", "660")
    assert _mode(config) == 0o660


@pytest.mark.parametrize(
    "config_mode", [None, 0o644, 0o660, 0o4755], ids=["new", "644", "660", "4755"]
)
def test_the_lock_file_is_the_owners_alone_whatever_the_config_files_mode(
    tmp_path: Path, config_mode: int | None
) -> None:
    """Only whoever may write the config takes the lock; one that others could open, they
    could hold, and stop every `config set`."""
    config = tmp_path / "config.json"
    if config_mode is not None:
        config.write_text("{}")
        config.chmod(config_mode)
    _set_under_umask_022(config, "max-retries", "5")
    assert _mode(tmp_path / ".config.json.lock") == 0o600


def test_a_lock_path_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    os.mkfifo(tmp_path / ".c.json.lock")  # opening a FIFO would wait for a writer forever
    command = [sys.executable, "-m", "queuectl_tui", "--config", str(config)]
    result = subprocess.run(
        [*command, "config", "set", "max-retries", "5"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=30,
    )
    assert result.returncode == 2 and "not a regular file" in result.stderr, result.stderr
    assert not config.exists()


def test_the_lock_file_is_ignored_by_git() -> None:
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        pytest.skip("not a git work tree")
    ignored = subprocess.run(
        ["git", "check-ignore", ".config.json.lock", "deploy/.prod.json.lock"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ignored.stdout.split() == [".config.json.lock", "deploy/.prod.json.lock"]


@pytest.mark.parametrize("value", ["644", "777", "0", "six hundred", "600.5"])
def test_file_mode_takes_only_600_or_660(tmp_path: Path, value: str) -> None:
    config = tmp_path / "config.json"
    with pytest.raises(ConfigError, match="file-mode must be"):
        write_setting(config, "file-mode", value)
    assert not config.exists()


def test_file_mode_as_permission_bits(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"file_mode": 660}))
    assert load_settings(config_path=str(config), env={}).file_permissions == 0o660
    assert load_settings(env={}).file_permissions == 0o600


def test_the_database_setting_takes_its_earlier_name_and_replaces_it(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"database_path": "old.db"}))
    assert load_settings(str(path), None, {}).database == str(tmp_path / "old.db")
    write_setting(path, "database", "sqlite:////var/q.db")
    assert json.loads(path.read_text()) == {"database": "sqlite:////var/q.db"}
    assert load_settings(str(path), None, {}).database == "/var/q.db"
    write_setting(path, "database", "sqlite:///rel.db")  # relative: to the config file
    assert load_settings(str(path), None, {}).database == str(tmp_path / "rel.db")


# -- what a change reaches ---------------------------------------------------------------------
def _queuectl(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queuectl_tui", "--config", str(config), *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )


@pytest.mark.parametrize(
    ("key", "value", "reach"),
    [
        ("job-timeout", "3", "running pools use it from their next run"),
        ("output-limit", "1000", "running pools use it from their next run"),
        ("kill-grace", "1", "running pools use it from their next run"),
        ("backoff-base", "3", "running pools use it from their next failure"),
        ("max-backoff", "60", "running pools use it from their next failure"),
        ("heartbeat-interval", "1", "running pools apply it after a restart"),
        ("keep-dead-days", "3", "running pools apply it after a restart"),
        ("max-retries", "5", "jobs get it as they are enqueued; running servers and consoles"),
        ("http-body-limit", "2048", "a running `queuectl serve` applies it after a restart"),
    ],
)
def test_config_set_says_when_running_pools_apply_the_change(
    tmp_path: Path, key: str, value: str, reach: str
) -> None:
    config = tmp_path / "config.json"
    result = _queuectl(config, "config", "set", key, value)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{key} = {value} (saved to {config}): {reach}")
    assert result.stdout.count("\n") == 1


def test_config_list_and_set_help_name_the_live_settings(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text("{}")
    listed = _queuectl(config, "config", "list", "-o", "table").stdout
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in listed.splitlines()]
    live = {row[0]: row[3] for row in cells if len(row) == 5 and row[0]}
    assert len(live) == len(SETTINGS)
    assert {name: when for name, when in live.items() if when != "no"} == {
        "job-timeout": "next run",
        "output-limit": "next run",
        "output-streams": "next run",
        "kill-grace": "next run",
        "backoff-base": "next failure",
        "max-backoff": "next failure",
    }
    helped = " ".join(_queuectl(config, "config", "set", "--help").stdout.split())
    assert (
        "Running pools apply job-timeout, output-limit, output-streams and kill-grace from their "
        "next run, and "
        "backoff-base and max-backoff from their next failure, without a restart. Every other "
        "setting reaches running pools and servers only when they restart"
    ) in helped


def test_schedules_in_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "schedules": {
                    "nightly": {
                        "cron": "0 2 * * *",
                        "timezone": "Europe/Berlin",
                        "type": "email",
                        "payload": {"to": "ops"},
                        "catch_up": "none",
                    },
                    "ping": {"every": "30s", "command": "true", "queue": "pings"},
                },
                "job_types": {"email": {"command": "cat"}},
            }
        )
    )
    settings = load_settings(str(config), env={})
    assert settings.schedules is not None
    assert sorted(settings.schedules) == ["nightly", "ping"]
    nightly = settings.schedules["nightly"]
    assert (nightly.timing, nightly.timezone, nightly.catch_up) == (
        "0 2 * * *",
        "Europe/Berlin",
        "none",
    )
    job = nightly.job
    assert (job.job_type, job.command, job.payload) == ("email", "cat", '{"to":"ops"}')
    assert settings.schedules["ping"].every_ms == 30_000
    config.write_text(json.dumps({"schedules": {"bad": {"cron": "0 2 * *", "command": "x"}}}))
    with pytest.raises(ConfigError, match=r"schedules\.bad: a cron expression has 5 fields"):
        load_settings(str(config), env={})
    config.write_text(json.dumps({"schedules": {"two words": {"every": "5m", "command": "x"}}}))
    with pytest.raises(ConfigError, match="schedule's name"):
        load_settings(str(config), env={})
    config.write_text(json.dumps({}))
    assert load_settings(str(config), env={}).schedules is None  # no key: pools leave them be
