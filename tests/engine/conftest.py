"""Fixtures for engine tests."""

from __future__ import annotations

import logging
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
