"""The SQLite store's change feed: whether any process committed to the queue, told to a thread
that waits on a descriptor instead of polling.

- `inotify` on the database's `-wal` file (Linux): every commit, from any process, writes to
  the WAL, so the feed's descriptor becomes readable then. A WAL write is seen slightly
  before its commit is visible, so `drain` first waits for the write turn to pass (see
  writelock.py: every queuectl writer commits within its turn), drains what that transaction
  wrote, then reads `PRAGMA data_version` once. A writer that takes no turn (an older
  queuectl, the sqlite3 shell) is looked at again after 1, 2, 4 ... ms (`wait_at_most`).
- `poll`: no descriptor; `PRAGMA data_version` every 2 ms (any platform; a few % of a core).

A pool's dispatcher asks only for commits that may give a worker work (`work_only`): inotify then
watches the queue's bell, the write-turn lock file, which such a commit writes to after it
committed (see writelock.py), instead of the WAL. The pools' own claims, results and
heartbeats do not ring it, and a ring needs no wait for the writer's turn. What was committed
without a ring (another pool's bookkeeping, a writer that takes no turn) is still seen by
`PRAGMA data_version` within SAFETY_POLL.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import struct
from typing import TYPE_CHECKING

from ..base import ChangeFeed, StoreError

if TYPE_CHECKING:
    from .store import SQLiteStore

# inotify constants from <sys/inotify.h>.
_IN_MODIFY = 0x00000002
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_IGNORED = 0x00008000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_EVENT_HEADER = struct.Struct("iIII")

MODES = ("auto", "inotify", "poll")
POLL_INTERVAL = 0.002  # seconds between data_version checks in poll mode
# A WAL write whose commit was not visible after the write turn passed is looked at again
# after this, doubling up to the last.
RECHECK_FIRST = 0.001
RECHECK_LAST = 0.016
SAFETY_POLL = 0.5  # in inotify mode, data_version is read at least this often anyway


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
        self._inode: int | None = None
        self.rewatch()

    def rewatch(self) -> bool:
        """(Re)attach the watch; False while the file does not exist."""
        wd = self._libc.inotify_add_watch(
            self.fd, os.fsencode(self.path), _IN_MODIFY | _IN_DELETE_SELF | _IN_MOVE_SELF
        )
        self.watching = wd >= 0
        self._inode = self._current_inode() if self.watching else None
        return self.watching

    def follow(self) -> None:
        """Watch the file now at the path if it is another than the one watched (it was
        removed and made again while something held the old one open, so the old one's
        watch saw no end). The old watch stays: its holders may still write to it."""
        inode = self._current_inode()
        if inode is not None and inode != self._inode:
            self.rewatch()

    def _current_inode(self) -> int | None:
        try:
            return os.stat(self.path).st_ino
        except OSError:
            return None

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
    return os.uname().sysname == "Linux"


class SQLiteChangeFeed(ChangeFeed):
    """Changes to one SQLite queue, read through `store` (a connection of the feed's own)."""

    def __init__(
        self, store: SQLiteStore, wal_path: str, mode: str = "auto", bell_path: str | None = None
    ) -> None:
        """Watches the WAL, or the bell at `bell_path` where given (see the module's text)."""
        if mode not in MODES:
            raise ValueError(f"unknown wake mode {mode!r}")
        self._store = store
        self._inotify: _Inotify | None = None
        self._bell = bell_path is not None
        if mode in ("auto", "inotify") and inotify_available():
            try:
                self._inotify = _Inotify(bell_path or wal_path)
            except (OSError, AttributeError):
                if mode == "inotify":
                    raise
        self.mode = "inotify" if self._inotify is not None else "poll"
        self._token = self._read_token()
        self._recheck: float | None = None  # a write not yet seen committed: look again after

    def fileno(self) -> int | None:
        return None if self._inotify is None else self._inotify.fd

    def wait_at_most(self) -> float:
        if self._inotify is None:
            return POLL_INTERVAL
        return SAFETY_POLL if self._recheck is None else self._recheck

    def drain(self) -> bool:
        written = False
        inotify = self._inotify
        if inotify is not None:
            written = inotify.drain()
            if not inotify.watching:
                inotify.rewatch()
            if written and self._bell:
                # Rung after a commit: it is visible, and it may have given a worker work
                # even if a look at data_version in between has seen it already.
                self._token, self._recheck = self._read_token(), None
                return True
            if self._bell:
                inotify.follow()  # a look now and then, when nothing rang
            if written:
                # The writer's turn ends with its commit; what the rest of that transaction
                # wrote meanwhile is drained with it, not woken for again.
                self._wait_for_writers()
                inotify.drain()
        token = self._read_token()
        if token != self._token:
            self._token, self._recheck = token, None
            return True
        if written or self._recheck is not None:
            # Written but not visible: a writer that takes no turn is still at it.
            self._recheck = RECHECK_FIRST if self._recheck is None else self._recheck * 2
            if self._recheck > RECHECK_LAST:
                self._recheck = None  # the safety poll takes over
        return False

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

    def _wait_for_writers(self) -> None:
        with contextlib.suppress(OSError):  # the lock file went away: the recheck covers it
            self._store.wait_for_writers()

    def _read_token(self) -> int | None:
        try:
            return self._store.change_token()
        except StoreError:
            return None
