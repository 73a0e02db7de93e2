"""Fixtures for engine tests."""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_helpers import Queue

from queuectl_tui.engine import events
from queuectl_tui.store import open_store

from helpers import backend_location


@pytest.fixture
def queue(backend: str, tmp_path: Path) -> Iterator[Queue]:
    """A new queue of `backend`; pool processes started on it are killed afterwards."""
    q = Queue(tmp_path, backend_location(backend, tmp_path))
    try:
        yield q
    finally:
        q.close()


@pytest.fixture
def database(backend: str, tmp_path: Path) -> Iterator[str]:
    """Where a new, empty queue of `backend` lives, for in-process pools; their log handlers
    go afterwards."""
    location = backend_location(backend, tmp_path)
    open_store(location).close()
    yield location
    logging.getLogger(events.LOGGER_NAME).handlers.clear()


@pytest.fixture(scope="session")
def namespaces_missing() -> str | None:
    """Why this machine cannot give a process namespaces of its own, or None if it can."""
    if shutil.which("unshare") is None:
        return "no unshare here (util-linux)"
    probe = ["unshare", "--uts", "--pid", "--mount-proc", "--fork", "hostname", "probe"]
    try:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare failed: {error}"
    if result.returncode != 0:
        return f"cannot make namespaces (root needed): {result.stderr.strip()}"
    return None
