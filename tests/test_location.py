"""Where a queue lives: a path or a URL naming its backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from queuectl_tui.config import load_settings
from queuectl_tui.errors import ConfigurationError
from queuectl_tui.location import absolute, normalise, scheme, shown
from queuectl_tui.store import open_store

from helpers import RunCli


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("queue.db", "queue.db"),
        ("/var/q.db", "/var/q.db"),
        ("sqlite:///var/q.db", "/var/q.db"),
        ("SQLite://rel/q.db", "rel/q.db"),
        ("postgresql://host/db", "postgresql://host/db"),
        ("postgres://host/db", "postgres://host/db"),
    ],
)
def test_a_sqlite_url_becomes_its_path_and_other_backends_keep_their_url(
    given: str, expected: str
) -> None:
    assert normalise(given) == expected


def test_home_is_expanded_in_paths_and_sqlite_urls() -> None:
    home = str(Path.home())
    assert normalise("~/q.db") == f"{home}/q.db"
    assert normalise("sqlite://~/q.db") == f"{home}/q.db"


def test_schemes_are_recognised_with_their_aliases() -> None:
    assert scheme("queue.db") is None
    assert scheme("postgres://h/d") == scheme("postgresql+psycopg://h/d") == "postgresql"


@pytest.mark.parametrize(
    ("given", "message"),
    [("mysql://host/db", "unknown database URL scheme 'mysql'"), ("sqlite://", "names no file")],
)
def test_a_url_no_backend_takes_is_refused(given: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        normalise(given)


def test_a_bad_schema_in_a_postgresql_url_is_refused_before_connecting() -> None:
    with pytest.raises(ConfigurationError, match="schema 'Bad-Name' in the database URL"):
        open_store("postgresql://127.0.0.1:1/test?schema=Bad-Name")


def test_an_unreachable_postgresql_server_is_one_sentence(run_cli: RunCli) -> None:
    refused = run_cli("--db", "postgresql://nobody:secret@127.0.0.1:1/test", "status", db=False)
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1
    assert "postgresql://nobody:***@127.0.0.1:1/test" in refused.stderr  # the password left out
    assert "secret" not in refused.stderr


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u:pw@host/db", "postgresql://u:***@host/db"),
        ("postgresql://u@host/db", "postgresql://u@host/db"),
        ("postgresql://host/db?schema=a", "postgresql://host/db?schema=a"),
        ("/var/q.db", "/var/q.db"),
    ],
)
def test_a_shown_location_hides_the_password(given: str, expected: str) -> None:
    assert shown(given) == expected


def test_the_store_opens_a_sqlite_url(tmp_path: Path) -> None:
    with open_store(f"sqlite://{tmp_path}/q.db") as store:
        assert store.counts() is not None
    assert (tmp_path / "q.db").is_file()


def test_db_flag_environment_and_config_file_take_urls(tmp_path: Path, run_cli: RunCli) -> None:
    url = f"sqlite://{tmp_path}/url.db"
    assert (
        run_cli("--db", url, "enqueue", '{"id": "a", "command": "true"}', db=False).returncode == 0
    )
    assert (tmp_path / "url.db").is_file()
    env = {"QUEUECTL_DB": url}
    assert load_settings(None, None, env).database == f"{tmp_path}/url.db"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"database_path": "sqlite://rel.db"}))
    assert load_settings(str(config), None, {}).database == f"{tmp_path}/rel.db"
    bad = run_cli("--db", "postgresql://127.0.0.1/test?schema=9x", "status", db=False)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "schema '9x'" in bad.stderr


def test_a_symlink_loop_is_made_absolute_without_raising(tmp_path: Path) -> None:
    (tmp_path / "loop.db").symlink_to("loop.db")
    assert absolute(str(tmp_path / "loop.db")) == str(tmp_path / "loop.db")
