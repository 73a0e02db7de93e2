"""The change listener: a face hears of any commit at once, and of a stream of them once per gap."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from queuectl_tui.listen import ChangeListener
from queuectl_tui.store import open_store

from helpers import spec, wait_until

NOW = 1_700_000_000_000


def test_the_first_change_is_told_and_a_burst_after_it_is_told_once_more(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    told: list[float] = []
    changed = threading.Event()

    def on_change() -> None:
        told.append(time.monotonic())
        changed.set()

    open_store(db).close()
    listener = ChangeListener(lambda: open_store(db), on_change, gap=1.0)
    listener.start()
    try:
        assert listener.listening
        with open_store(db) as writer:
            writer.enqueue(spec(id="first"), 3, NOW)
            wait_until(changed.is_set)
            for index in range(20):  # all within the gap after the first
                writer.enqueue(spec(id=f"burst-{index}"), 3, NOW)
        wait_until(lambda: len(told) == 2)
        time.sleep(1.5)  # a further gap: nothing more to tell
        assert len(told) == 2
        assert told[1] - told[0] >= 1.0  # the burst waited for the end of the gap
    finally:
        listener.stop()
        listener.join(timeout=10)
    assert not listener.is_alive()


def test_nothing_is_told_while_nothing_changes(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    open_store(db).close()
    told: list[int] = []
    listener = ChangeListener(lambda: open_store(db), lambda: told.append(1), gap=0.1)
    listener.start()
    time.sleep(1.0)
    listener.stop()
    listener.join(timeout=10)
    assert told == []
