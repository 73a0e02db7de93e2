"""The store's change feed: a waiting thread learns of any connection's commit."""

from __future__ import annotations

import select
from pathlib import Path

import pytest

from queuectl_tui.store import open_store
from queuectl_tui.store.sqlite.changes import inotify_available

from helpers import spec

NOW = 1_700_000_000_000


@pytest.mark.parametrize("mode", ["inotify", "poll"])
def test_a_commit_by_another_connection_is_fed_once(tmp_path: Path, mode: str) -> None:
    if mode == "inotify" and not inotify_available():
        pytest.skip("inotify is Linux only")
    db = tmp_path / "q.db"
    with open_store(db) as reader, open_store(db) as writer:
        feed = reader.change_feed(mode)
        try:
            assert feed.mode == mode
            assert (feed.fileno() is None) == (mode == "poll")
            assert not feed.drain()  # nothing yet
            writer.enqueue(spec(id="a"), 3, NOW)
            if feed.fileno() is not None:
                ready, _, _ = select.select([feed.fileno()], [], [], 10)
                assert ready, "the feed's descriptor did not become readable"
            assert feed.drain()
            assert not feed.drain()  # told once
            assert feed.wait_at_most() > 0
        finally:
            feed.close()


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path / "q.db") as store, pytest.raises(ValueError, match="wake mode"):
        store.change_feed("telepathy")
