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
# runs against; a new store adds its name here and a branch to open_backend.
BACKENDS = ("sqlite",)


def backend_location(backend: str, folder: Path, name: str = "queue.db") -> str:
    """Where a fresh, empty queue of `backend` lives for one test (a path or a URL)."""
    if backend == "sqlite":
        return str(folder / name)
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
