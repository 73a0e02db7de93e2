"""Where a queue lives: a path or a URL naming its backend."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

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
        ("//var/q.db", "/var/q.db"),  # one root: no SQLite URI may read `var` as a host
        # SQLAlchemy's form, as Django and Celery users write it: three slashes and a relative
        # path, four and an absolute one.
        ("sqlite:///q.db", "q.db"),
        ("sqlite:///rel/q.db", "rel/q.db"),
        ("sqlite:////var/q.db", "/var/q.db"),
        ("SQLite:////var/q.db", "/var/q.db"),
        ("sqlite+pysqlite:////var/q.db", "/var/q.db"),
        ("sqlite://///var/q.db", "/var/q.db"),
        ("sqlite:///a b.db", "a b.db"),
        ("sqlite:////tmp/my%20queue%3F%23%25.db", "/tmp/my queue?#%.db"),  # decoded
        ("/tmp/my queue?#%20.db", "/tmp/my queue?#%20.db"),  # a path is taken as it is
        ("postgresql://host/db", "postgresql://host/db"),
        ("postgres://host/db", "postgres://host/db"),
    ],
)
def test_a_sqlite_url_becomes_its_path_and_other_backends_keep_their_url(
    given: str, expected: str
) -> None:
    assert normalise(given) == expected
    assert normalise(normalise(given)) == expected  # each face may normalise it again


def test_home_is_expanded_in_paths_and_sqlite_urls() -> None:
    home = str(Path.home())
    assert normalise("~/q.db") == f"{home}/q.db"
    assert normalise("sqlite:///~/q.db") == f"{home}/q.db"


def test_schemes_are_recognised_with_their_aliases() -> None:
    assert scheme("queue.db") is None
    assert scheme("postgres://h/d") == scheme("postgresql+psycopg://h/d") == "postgresql"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("mysql://host/db", "unknown database URL scheme 'mysql'"),
        ("sqlite://", "names no file"),
        ("sqlite:///", "names no file"),
        ("sqlite://rel.db", "names a host"),
        ("sqlite://host/q.db", "names a host"),
        ("sqlite:///q.db?mode=ro", "takes no parameters"),
        ("sqlite:///a%00b.db", "NUL"),
        ("a\x00b.db", "NUL"),
    ],
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
    with open_store(f"sqlite:///{tmp_path}/q.db") as store:
        assert store.counts() is not None
    assert (tmp_path / "q.db").is_file()


def test_db_flag_environment_and_config_file_take_urls(tmp_path: Path, run_cli: RunCli) -> None:
    url = f"sqlite:///{tmp_path}/url.db"
    assert (
        run_cli("--db", url, "enqueue", '{"id": "a", "command": "true"}', db=False).returncode == 0
    )
    assert (tmp_path / "url.db").is_file()
    env = {"QUEUECTL_DB": url}
    assert load_settings(None, None, env).database == f"{tmp_path}/url.db"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"database_path": "sqlite:///rel.db"}))
    assert load_settings(str(config), None, {}).database == f"{tmp_path}/rel.db"
    bad = run_cli("--db", "postgresql://127.0.0.1/test?schema=9x", "status", db=False)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "schema '9x'" in bad.stderr


def test_a_symlink_loop_is_made_absolute_without_raising(tmp_path: Path) -> None:
    (tmp_path / "loop.db").symlink_to("loop.db")
    assert absolute(str(tmp_path / "loop.db")) == str(tmp_path / "loop.db")


@pytest.mark.parametrize("name", ["abs.db", "my queue?#%20.db"])
def test_every_command_reads_the_queue_a_sqlite_url_names(
    tmp_path: Path, run_cli: RunCli, name: str
) -> None:
    url = f"sqlite:///{quote(str(tmp_path / name))}"  # four slashes: absolute
    added = run_cli("--db", url, "enqueue", '{"id": "a", "command": "true"}', db=False)
    assert added.returncode == 0, added.stderr
    for command in (("list", "--json"), ("status", "--json"), ("show", "a"), ("workers",)):
        result = run_cli("--db", url, *command, db=False)
        assert result.returncode == 0, (command, result.stderr)
    assert json.loads(run_cli("--db", url, "list", "--json", db=False).stdout)[0]["id"] == "a"
    # The same file through its path, as the plain path it is.
    listed = run_cli("--db", str(tmp_path / name), "list", "--json", db=False)
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["id"] == "a", listed.stderr
    assert (tmp_path / name).is_file()  # the name as it was written, decoded


def test_three_slashes_name_a_file_in_the_working_directory(
    tmp_path: Path, run_cli: RunCli
) -> None:
    added = run_cli("--db", "sqlite:///rel.db", "enqueue", '{"command": "true"}', db=False)
    assert added.returncode == 0, added.stderr
    assert (tmp_path / "cwd" / "rel.db").is_file()
    listed = run_cli("--db", "sqlite:///rel.db", "list", "--json", db=False)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 1


def test_a_sqlite_url_with_a_host_is_bad_input_and_creates_nothing(
    tmp_path: Path, run_cli: RunCli
) -> None:
    for url in ("sqlite://rel.db", "sqlite:///q.db?mode=ro"):
        refused = run_cli("--db", url, "enqueue", '{"command": "true"}', db=False)
        assert refused.returncode == 2, (url, refused.stderr)
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert list((tmp_path / "cwd").iterdir()) == []
    config = tmp_path / "config.json"
    refused = run_cli("--config", str(config), "config", "set", "database", "sqlite://q.db")
    assert refused.returncode == 2 and "names a host" in refused.stderr
    assert not config.exists()


def test_a_path_with_two_leading_slashes_is_read(tmp_path: Path, run_cli: RunCli) -> None:
    path = "/" + str(tmp_path / "q.db")
    assert run_cli("--db", path, "enqueue", '{"command": "true"}', db=False).returncode == 0
    listed = run_cli("--db", path, "list", "--json", db=False)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 1, listed.stderr
