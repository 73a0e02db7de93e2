"""Fixtures shared by the whole suite: a fresh store and a way to run the real CLI."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from queuectl_tui.store import Store

from helpers import (
    BACKENDS,
    REQUIRE_POSTGRES,
    RunCli,
    clean_env,
    drop_test_schemas,
    open_backend,
    postgres_available,
)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "queue.db"


@pytest.fixture(scope="session")
def postgres_missing() -> str | None:
    return postgres_available()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, postgres_missing: str | None) -> Iterator[str]:
    """Each backend the store contract and the engine's scenarios run against; a test marked
    sqlite_only runs on SQLite alone. A PostgreSQL test gets schemas of its own, dropped
    after it."""
    if request.param != "sqlite" and request.node.get_closest_marker("sqlite_only"):
        pytest.skip("checks SQLite's own files or locks")
    if request.param == "postgresql" and postgres_missing is not None:
        if REQUIRE_POSTGRES:
            pytest.fail(f"{postgres_missing} (QUEUECTL_REQUIRE_POSTGRES is set)")
        pytest.skip(postgres_missing)
    yield str(request.param)
    if request.param == "postgresql":
        drop_test_schemas()


@pytest.fixture
def store(backend: str, tmp_path: Path) -> Iterator[Store]:
    opened = open_backend(backend, tmp_path)
    yield opened
    opened.close()


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """An environment that cannot pick up the developer's own config or database."""
    return clean_env()


@pytest.fixture
def run_cli(tmp_path: Path, db_path: Path, cli_env: dict[str, str]) -> RunCli:
    """Run `queuectl --db <tmp db> ARGS...` in a real subprocess, from an empty folder."""
    workdir = tmp_path / "cwd"
    workdir.mkdir(exist_ok=True)

    def run(
        *args: str, input: str | None = None, db: bool = True
    ) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "queuectl_tui"]
        if db:
            command += ["--db", str(db_path)]
        return subprocess.run(
            [*command, *args],
            # Never the test runner's own stdin: a command reads a pipe it is given.
            **({"input": input} if input is not None else {"stdin": subprocess.DEVNULL}),
            capture_output=True,
            text=True,
            cwd=workdir,
            env=cli_env,
            timeout=600,  # generous: a bench on a loaded machine takes minutes
        )

    return run
