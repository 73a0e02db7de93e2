from __future__ import annotations

import json
from pathlib import Path

import pytest

from queuectl_tui.config import ConfigError, load_settings, setting_spec, write_setting


def test_defaults_without_any_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(env={})
    assert settings.database_path == "queue.db"
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
    assert from_file.database_path == "from-file.db" and from_file.max_retries == 5
    from_env = load_settings(env={"QUEUECTL_DB": "env.db"})
    assert from_env.database_path == "env.db" and from_env.max_retries == 5
    from_flag = load_settings(db_path="flag.db", env={"QUEUECTL_DB": "env.db"})
    assert from_flag.database_path == "flag.db"


def test_explicit_config_file_and_relative_database(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "q.json").write_text(json.dumps({"database_path": "jobs.db"}))
    settings = load_settings(config_path=str(folder / "q.json"), env={})
    assert Path(settings.database_path) == folder / "jobs.db"
    via_env = load_settings(env={"QUEUECTL_CONFIG": str(folder / "q.json")})
    assert via_env.database_path == settings.database_path


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
    with pytest.raises(ConfigError, match="valid settings: database-path, max-retries"):
        write_setting(path, "nope", "1")
    with pytest.raises(ConfigError, match="at least 1"):
        write_setting(path, "backoff-base", "0.5")
    with pytest.raises(ConfigError, match="integer"):
        write_setting(path, "max-retries", "2.5")
    assert json.loads(path.read_text()) == {"database_path": "x.db", "backoff_base": 3.0}
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]  # no temp files left


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
