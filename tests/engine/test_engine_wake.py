"""The watcher: a commit rings an idle pool only when it gives a worker something to do, and
a commit by another process is seen once its write turn has passed."""

from __future__ import annotations

import select
from pathlib import Path

import pytest
from engine_helpers import wait_until

from queuectl_tui.engine.wake import ChangeWatcher, Doorbell
from queuectl_tui.models import JobSpec, WorkerStatus
from queuectl_tui.store import open_store
from queuectl_tui.store.sqlite.changes import inotify_available
from queuectl_tui.timeutil import now_ms

QUIET = 0.5  # how long a change that gives nobody work is watched for a wrong ring


def _rung(doorbell: Doorbell, wait: float = 0.0) -> bool:
    ready, _, _ = select.select([doorbell.fileno()], [], [], wait)
    if ready:
        doorbell.clear()
    return bool(ready)


@pytest.mark.parametrize("mode", ["inotify", "poll"])
def test_only_a_change_that_gives_an_idle_worker_work_rings(tmp_path: Path, mode: str) -> None:
    if mode == "inotify" and not inotify_available():
        pytest.skip("inotify is Linux only")
    db = tmp_path / "q.db"
    open_store(db).close()
    doorbell = Doorbell()
    doorbell.listening = True  # a free worker found no work
    watcher = ChangeWatcher(lambda: open_store(db), doorbell, mode)
    assert watcher.mode == mode
    watcher.start()
    try:
        with open_store(db) as store:
            _rung(doorbell)  # whatever its first look rang (the first drain looks anyway)
            # The pool's own bookkeeping and a job for later: nothing to claim now.
            store.set_worker_status("w1", WorkerStatus.IDLE, None, now_ms())
            store.enqueue(JobSpec("later", "true", run_at=now_ms() + 3_600_000), 3, now_ms())
            assert not _rung(doorbell, QUIET)
            store.enqueue(JobSpec("now", "true"), 3, now_ms())
            wait_until(lambda: _rung(doorbell), timeout=10, what="the ring for a due job")
    finally:
        watcher.stop()
        watcher.join(timeout=10)
        doorbell.close()
