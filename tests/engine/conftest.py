"""Fixtures for engine tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_helpers import Queue

from queuectl_tui.engine import events
from queuectl_tui.store import open_store


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[Queue]:
    """A temporary database; pool processes started through it are killed afterwards."""
    q = Queue(tmp_path)
    try:
        yield q
    finally:
        q.close()


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Path]:
    """A new, empty queue database for in-process pools; their log handlers go afterwards."""
    path = tmp_path / "queue.db"
    open_store(path).close()
    yield path
    logging.getLogger(events.LOGGER_NAME).handlers.clear()
