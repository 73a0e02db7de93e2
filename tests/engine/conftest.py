"""Fixtures for engine tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_helpers import Queue


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[Queue]:
    """A temporary database; pool processes started through it are killed afterwards."""
    q = Queue(tmp_path)
    try:
        yield q
    finally:
        q.close()
