"""The generated HTTP token's file: where it is for SQLite and PostgreSQL, made once with
mode 0600, and refused when others could have read or written it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from queuectl_tui.http_token import (
    TokenFileError,
    ensure_token,
    read_token,
    token_file,
    without_password,
)


def test_a_sqlite_queue_keeps_its_token_beside_the_database(tmp_path: Path) -> None:
    where = token_file(str(tmp_path / "q.db"))
    assert where.path == tmp_path / "q.db.http-token" and not where.private_folder
    assert read_token(where.path) is None
    token, created = ensure_token(where)
    assert created and len(token) >= 32
    assert stat.S_IMODE(where.path.stat().st_mode) == 0o600
    assert ensure_token(where) == (token, False)  # the same on every later start


def test_a_postgresql_queue_keeps_it_per_user_under_a_name_without_the_password(
    tmp_path: Path,
) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    url = "postgresql://ops:s3cret@db.example:5432/queue?password=other&schema=jobs"
    where = token_file(url, env)
    assert where.private_folder and where.path.parent == tmp_path / "state" / "queuectl"
    assert "s3cret" not in str(where.path) and "other" not in str(where.path)
    assert without_password(url) == "postgresql://ops@db.example:5432/queue?schema=jobs"
    assert token_file("postgresql://ops:changed@db.example:5432/queue?schema=jobs", env) == where
    assert token_file("postgresql://ops@db.example:5432/queue?schema=other", env) != where
    ensure_token(where)
    assert stat.S_IMODE(where.path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(where.path.stat().st_mode) == 0o600
    where.path.unlink()
    where.path.parent.chmod(0o755)
    with pytest.raises(TokenFileError, match="make it 0700"):
        ensure_token(where)


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda path: path.chmod(0o640), "not 0600"),
        (lambda path: path.write_text("short\n"), "no usable token"),
        (lambda path: (path.unlink(), path.symlink_to("/etc/hostname")), "symbolic link"),
    ],
)
def test_a_token_file_others_could_touch_is_refused_in_one_sentence(
    tmp_path: Path, setup: object, message: str
) -> None:
    where = token_file(str(tmp_path / "q.db"))
    token, _ = ensure_token(where)
    setup(where.path)  # type: ignore[operator]
    with pytest.raises(TokenFileError, match=message) as refused:
        ensure_token(where)
    assert token not in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_a_token_file_of_another_user_is_refused(tmp_path: Path) -> None:
    where = token_file(str(tmp_path / "q.db"))
    ensure_token(where)
    os.chown(where.path, 65534, 65534)
    with pytest.raises(TokenFileError, match="belongs to another user"):
        read_token(where.path)
