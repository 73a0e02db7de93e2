"""Waking idle workers: new work from any process starts within milliseconds, while an idle
pool sleeps in the kernel instead of polling.

One watcher thread per pool notices that the database changed and rings the dispatcher's
doorbell when there is work to claim; the dispatcher then claims for every free worker in one
transaction. Change detection, best first:

- `inotify` on the database's `-wal` file (Linux): every commit, from any process, writes to
  the WAL, so the watcher sleeps until then. A WAL write is seen slightly before its commit is
  visible, so the watcher first waits for the write turn to pass (see writelock.py: every
  queuectl writer commits within its turn), then reads `PRAGMA data_version` once. A writer
  that takes no turn (an older queuectl, the sqlite3 shell) is looked at again after 1, 2,
  4 ... ms; a slow `data_version` poll stays on as a safety net.
- `poll`: `PRAGMA data_version` every 2 ms (any platform; costs a few % of a core).

A change rings the dispatcher only when a worker looking now would find a job: the pool's own
claims and settlements, and jobs scheduled for later, wake nobody. The watcher also rings when
the next known `run_at` arrives (a retry's backoff ending, a job scheduled for later), so a due
job is never slept through. While every worker is busy the watcher lies dormant: the
dispatcher claims the next jobs in the transaction that settles the last ones, and wakes the
watcher when a worker finds no work.

Measured with `queuectl bench --only pickup` (QUEUECTL_WAKE=poll for the second) on 2 cores:
inotify, idle pool 0.1-0.2% of a core, pickup p50 0.9 ms / p95 1.4 ms after the enqueue
committed; poll, 4% of a core, p50 1.6 ms / p95 2.7 ms.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import struct
import threading
import time
from collections.abc import Callable

from ..store import Store, StoreError
from ..timeutil import now_ms
from . import events

# inotify constants from <sys/inotify.h>.
_IN_MODIFY = 0x00000002
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_IGNORED = 0x00008000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_EVENT_HEADER = struct.Struct("iIII")

POLL_INTERVAL = 0.002  # seconds between data_version checks in poll mode
# A WAL write whose commit was not visible after the write turn passed (a writer that takes
# no turn) is looked at again after this, doubling up to the last.
RECHECK_FIRST = 0.001
RECHECK_LAST = 0.016
SAFETY_POLL = 0.5  # the slow data_version check that runs in inotify mode anyway
NEXT_RUN_REFRESH = 0.02  # at most this often the next run_at is re-read while changes stream


class Doorbell:
    """Wakes the dispatcher's poll loop: a pipe it watches. `listening` says whether the
    dispatcher has a free worker and found no work (the watcher lies dormant otherwise)."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)  # a full pipe already means "wake up"
        self.listening = False

    def fileno(self) -> int:
        return self._read

    def ring(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._write, b"!")

    def clear(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self._read, 4096):
                pass

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)


class _Inotify:
    """A minimal inotify binding (ctypes): one watch on the WAL file."""

    def __init__(self, path: str) -> None:
        name = ctypes.util.find_library("c") or "libc.so.6"
        self._libc = ctypes.CDLL(name, use_errno=True)
        self._libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.fd = fd
        self.path = path
        self.watching = False
        self.rewatch()

    def rewatch(self) -> bool:
        """(Re)attach the watch; False while the file does not exist."""
        wd = self._libc.inotify_add_watch(
            self.fd, os.fsencode(self.path), _IN_MODIFY | _IN_DELETE_SELF | _IN_MOVE_SELF
        )
        self.watching = wd >= 0
        return self.watching

    def drain(self) -> bool:
        """Consume pending events; True if the file was written."""
        written = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return written
            offset = 0
            while offset + _EVENT_HEADER.size <= len(data):
                _, mask, _, length = _EVENT_HEADER.unpack_from(data, offset)
                offset += _EVENT_HEADER.size + length
                if mask & _IN_MODIFY:
                    written = True
                if mask & (_IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF):
                    self.watching = False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def inotify_available() -> bool:
    return hasattr(os, "read") and os.uname().sysname == "Linux"


class ChangeWatcher(threading.Thread):
    """The pool's one watcher thread: notices commits and due run_at times, rings the
    dispatcher."""

    def __init__(
        self,
        open_store: Callable[[], Store],
        database_path: str,
        doorbell: Doorbell,
        mode: str = "auto",
    ) -> None:
        super().__init__(name="queuectl-wake", daemon=True)
        self._open_store = open_store
        self._wal_path = os.path.abspath(database_path) + "-wal"
        self._doorbell = doorbell
        self._halt = threading.Event()
        self._notify_r, self._notify_w = os.pipe()  # wakes select(): stop, schedule, idle
        os.set_blocking(self._notify_r, False)
        os.set_blocking(self._notify_w, False)  # a full pipe already means "wake up"
        self._dormant = False
        self._inotify: _Inotify | None = None
        self._next_due: int | None = None
        self._due_dirty = True
        if mode not in ("auto", "inotify", "poll"):
            raise ValueError(f"unknown wake mode {mode!r}")
        if mode in ("auto", "inotify") and inotify_available():
            try:
                self._inotify = _Inotify(self._wal_path)
            except (OSError, AttributeError):
                if mode == "inotify":
                    raise
        self.mode = "inotify" if self._inotify is not None else "poll"

    def schedule(self, run_at: int) -> None:
        """A job becomes due at `run_at` (ms): make sure an idle worker looks then."""
        self._due_dirty = True
        with contextlib.suppress(OSError):
            os.write(self._notify_w, b"s")

    def worker_idle(self) -> None:
        """A worker found no work: rouse a dormant watcher, and have a stale next run_at
        re-read now."""
        if self._dormant or self._due_dirty:
            with contextlib.suppress(OSError):
                os.write(self._notify_w, b"i")

    def stop(self) -> None:
        self._halt.set()
        with contextlib.suppress(OSError):
            os.write(self._notify_w, b"x")

    def run(self) -> None:
        store: Store | None = None
        try:
            store = self._open_store()
            self._loop(store)
        except StoreError as error:
            # Workers still find work on their own every IDLE_RECHECK seconds.
            events.event("wake watcher failed", level=30, error=str(error))
        finally:
            if store is not None:
                store.close()
            if self._inotify is not None:
                self._inotify.close()
            os.close(self._notify_r)
            os.close(self._notify_w)

    def _loop(self, store: Store) -> None:
        token = self._token(store)
        recheck: float | None = None  # a WAL write not yet seen committed: look again after
        last_due_read = 0.0
        while not self._halt.is_set():
            # Dormant while every worker is busy: the dispatcher finds the next jobs in the
            # same transaction that settles the last ones, so reacting to every commit would
            # only steal CPU from it. The flag is raised before `listening` is read, and the
            # dispatcher raises `listening` before reading the flag, so one of the two always
            # sees the other (the dispatcher then pokes the pipe).
            self._dormant = True
            if self._doorbell.listening:
                self._dormant = False
            fds = [self._notify_r]
            if self._dormant:
                wait = SAFETY_POLL
            elif self._inotify is None:
                wait = POLL_INTERVAL
            else:
                fds.append(self._inotify.fd)
                wait = SAFETY_POLL if recheck is None else recheck
            if self._next_due is not None:
                wait = min(wait, max(0.0, (self._next_due - now_ms()) / 1000))
            ready, _, _ = select.select(fds, [], [], wait)
            if self._notify_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._notify_r, 4096)
            written = False
            if self._inotify is not None:
                written = self._inotify.drain()
                if not self._inotify.watching:
                    self._inotify.rewatch()
                if written:
                    # The writer's turn ends with its commit; what the rest of that
                    # transaction wrote meanwhile is drained with it, not woken for again.
                    self._wait_for_writers(store)
                    self._inotify.drain()
            current = self._token(store)
            if current != token:
                token = current
                recheck = None
                self._due_dirty = True
                if self._work_is_due(store):
                    self._doorbell.ring()
            elif written or recheck is not None:
                # Written but not visible: a writer that takes no turn is still at it.
                recheck = RECHECK_FIRST if recheck is None else recheck * 2
                if recheck > RECHECK_LAST:
                    recheck = None  # the safety poll takes over
            if self._next_due is not None and now_ms() >= self._next_due:
                self._next_due = None
                self._due_dirty = True
                self._doorbell.ring()
            # Re-reading the next run_at is a small scan: only when it may have changed and
            # somebody is idle to use it, and not more than every NEXT_RUN_REFRESH seconds.
            if (
                self._due_dirty
                and self._doorbell.listening
                and time.monotonic() - last_due_read >= NEXT_RUN_REFRESH
            ):
                self._due_dirty = False
                last_due_read = time.monotonic()
                try:
                    self._next_due = store.next_run_at(now_ms())
                except StoreError as error:
                    self._due_dirty = True
                    events.event("wake watcher retrying", level=30, error=str(error))

    @staticmethod
    def _wait_for_writers(store: Store) -> None:
        try:
            store.wait_for_writers()
        except OSError as error:  # the lock file went away: the recheck covers it
            events.event("wake watcher retrying", level=30, error=str(error))

    @staticmethod
    def _work_is_due(store: Store) -> bool:
        """Whether the change gave an idle worker something to do; when in doubt, yes."""
        try:
            return store.has_due_work(now_ms())
        except StoreError:
            return True

    @staticmethod
    def _token(store: Store) -> int | None:
        try:
            return store.change_token()
        except StoreError:
            return None
