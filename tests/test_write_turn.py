"""The write turn among processes: a lock file beside the database, created like the database,
taken around every write, and waited for in line."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from queuectl_tui.models import WorkerStatus
from queuectl_tui.store import SQLiteStore, StoreOptions, StoreWaitingError, open_store

from helpers import spec

NOW = 1_700_000_000_000


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mode", [0o600, 0o660])
def test_the_lock_file_is_made_by_the_first_write_with_the_file_mode(
    tmp_path: Path, mode: int
) -> None:
    db = tmp_path / "q.db"
    lock = tmp_path / "q.db-lock"
    with SQLiteStore(db, file_mode=mode, create_at_open=False) as store:
        store.counts()
        assert not lock.exists()  # reading creates nothing
        store.enqueue(spec(id="a"), 3, NOW)
    assert _mode(lock) == mode == _mode(db)


def test_writes_go_on_under_sqlites_lock_when_no_lock_file_can_be_opened(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    (tmp_path / "q.db-lock").mkdir()  # not a file: unusable, as for a user who may not open it
    with SQLiteStore(db) as store:
        store.enqueue(spec(id="a"), 3, NOW)
        assert store.get("a") is not None


_HOLD_TURN = """
import fcntl, os, pathlib, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
marker = pathlib.Path(sys.argv[2])
marker.write_text("held")
while marker.exists():
    time.sleep(0.01)
"""


@contextlib.contextmanager
def _turn_held(db: Path, marker: Path) -> Iterator[None]:
    """Another process holds the database's write turn until `marker` is removed."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_TURN, f"{db}-lock", str(marker)])
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert holder.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        yield
    finally:
        marker.unlink(missing_ok=True)
        holder.wait(timeout=30)


def test_a_bounded_wait_that_runs_out_keeps_its_place_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    open_store(db).close()
    marker = tmp_path / "held"
    with _turn_held(db, marker), open_store(db, StoreOptions(lock_wait=0.05)) as store:
        with pytest.raises(StoreWaitingError, match="stayed locked"):
            store.enqueue(spec(id="early"), 3, NOW)
        assert store.get("early") is None
        marker.unlink()
        store.enqueue(spec(id="later"), 3, NOW)  # retried until the turn comes
        assert store.get("later") is not None


def test_a_durable_write_syncs_the_wal_after_passing_the_turn_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An enqueue returns only once its commit is on disk, but the disk is waited for outside
    the write turn, so that the next writer's transaction runs meanwhile."""
    import fcntl

    db = tmp_path / "q.db"
    synced: list[tuple[str, bool]] = []
    real_fsync = os.fdatasync

    def watching_fsync(fd: int) -> None:
        probe = os.open(f"{db}-lock", os.O_RDONLY)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: the turn was passed on
            turn_free = True
        except BlockingIOError:
            turn_free = False
        finally:
            os.close(probe)  # drops the probe's lock
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), turn_free))
        real_fsync(fd)

    with SQLiteStore(db) as store:
        store.enqueue(spec(id="warm-up"), 3, NOW)
        monkeypatch.setattr(os, "fdatasync", watching_fsync)
        store.enqueue(spec(id="a"), 3, NOW)
        assert synced == [(f"{db}-wal", True)]
        synced.clear()
        store.set_worker_status("w1", WorkerStatus.IDLE, None, NOW)  # not durable: no sync
        assert synced == []


def test_one_helper_thread_waits_in_line_for_a_store_however_often_it_waits(
    tmp_path: Path,
) -> None:
    """A busy producer makes the pool wait for its turn hundreds of times a second: starting
    a thread each time cost more than the wait."""
    import threading

    db = tmp_path / "q.db"
    open_store(db).close()
    helpers: set[int] = set()
    with open_store(db, StoreOptions(lock_wait=0.05)) as store:
        for number in range(4):
            marker = tmp_path / f"held-{number}"
            with _turn_held(db, marker):
                with pytest.raises(StoreWaitingError):
                    store.enqueue(spec(id=f"early-{number}"), 3, NOW)
                helpers.update(
                    t.native_id or 0
                    for t in threading.enumerate()
                    if t.name == "queuectl-write-turn"
                )
                marker.unlink()
                store.enqueue(spec(id=f"job-{number}"), 3, NOW)  # the helper's turn
    assert len(helpers) == 1
