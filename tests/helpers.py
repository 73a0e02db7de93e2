"""Small builders shared by tests (importable as `helpers`)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from queuectl_tui.models import JobSpec, parse_job_spec
from queuectl_tui.store import Store, open_store

# The `run_cli` fixture: run `queuectl ARGS...` in a subprocess and return its result.
RunCli = Callable[..., subprocess.CompletedProcess[str]]


def spec(**fields: object) -> JobSpec:
    """A validated job spec; the command defaults to `true`."""
    fields.setdefault("command", "true")
    return parse_job_spec(fields)


def wait_until(
    predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> Any:
    """Wait for `predicate` to hold (returning its value), up to a generous `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
        time.sleep(interval)


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without the developer's own queuectl settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUECTL_")}
    env.update(NO_COLOR="1", COLUMNS="200", **extra)
    return env


# The backends the store contract suite (test_store.py, the property and multi-process tests)
# and the engine's scenarios run against; a new store adds its name here and a branch to
# backend_location.
BACKENDS = ("sqlite", "postgresql")

# The PostgreSQL server the tests use; each test's queue lives in a schema of its own there.
POSTGRES_URL = os.environ.get("QUEUECTL_TEST_POSTGRES", "postgresql://127.0.0.1/test")
# Set (as .ci/run does) to make "no PostgreSQL here" a failure instead of a skip.
REQUIRE_POSTGRES = os.environ.get("QUEUECTL_REQUIRE_POSTGRES", "") not in ("", "0")
_schemas: set[str] = set()  # made by this test run, dropped when their test ends


def postgres_available() -> str | None:
    """Why the tests' PostgreSQL server cannot be used, or None when it can."""
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as error:  # any reason at all: the PostgreSQL tests cannot run
        return f"no PostgreSQL at {POSTGRES_URL}: {error}"
    return None


def postgres_location(folder: Path, name: str = "queue.db") -> str:
    """The URL of a queue in a schema named after the test's folder (the same every call)."""
    import hashlib

    schema = "t_" + hashlib.sha1(f"{folder}/{name}".encode()).hexdigest()[:20]
    _schemas.add(schema)
    joiner = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{joiner}schema={schema}"


def drop_test_schemas() -> None:
    """Drop the schemas the ended test made (its queues, and all in them)."""
    if not _schemas:
        return
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        for schema in sorted(_schemas):
            # A pool the test killed may still have a backend finishing a statement there:
            # the drop can lose a deadlock to it once; the backend is gone a moment later.
            for attempt in range(5):
                try:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                    break
                except psycopg.errors.DeadlockDetected:
                    if attempt == 4:
                        raise
                    time.sleep(0.5)
    _schemas.clear()


def backend_location(backend: str, folder: Path, name: str = "queue.db") -> str:
    """Where a fresh, empty queue of `backend` lives for one test (a path or a URL)."""
    if backend == "sqlite":
        return str(folder / name)
    if backend == "postgresql":
        return postgres_location(folder, name)
    raise ValueError(f"no such backend: {backend}")


def open_backend(backend: str, folder: Path, name: str = "queue.db") -> Store:
    return open_store(backend_location(backend, folder, name))


# The keys of the reference event-driven queue's GET /metrics JSON.
SEED_METRIC_KEYS = {
    "active_workers",
    "avg_execution_ms",
    "avg_time_in_queue_ms",
    "dead_letter_count",
    "failure_count",
    "queue_depth",
    "retry_count",
    "success_count",
}
