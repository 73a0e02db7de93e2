"""The database's write turn: among the threads of this process a lock per database file, then
among processes an exclusive flock on a file beside the database (`queue.db-lock`), both taken
around every write transaction.

SQLite's own write lock is fair to no one: a writer that finds it taken sleeps in the busy
handler (1, 2, 5, 10 ... ms) and tries again, so a producer that commits back to back, which
takes the lock again within microseconds of releasing it, keeps every other process out. The
kernel instead queues the waiters of a flock and wakes them as soon as it is released, so the
write turn passes from one process to the next while the producer is still preparing its next
job. SQLite's lock still guards the data (a writer that does not take part, such as an older
queuectl, is merely not queued); this lock only decides whose turn it is.

A waiter with a bounded wait (the pool's dispatcher, which must keep supervising its running
jobs) keeps its place in the queue when its wait runs out: a helper thread stays blocked in
the kernel for it, and hands the turn over at the next try.

The lock file is also the queue's bell: a write that may give a worker work (an enqueue, a
retry, a job handed back, room made in a queue with a limit) writes one byte to it after its
commit, within its turn, and idle pools watch it (see changes.py). The pools' own bookkeeping
(claims, settlements that leave nothing to run, live output, heartbeats) does not ring, so a
pool is not woken by every commit of its own."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import threading

from ...files import create_exclusive

log = logging.getLogger("queuectl.store")

LOCK_SUFFIX = "-lock"
# A turn the helper thread obtained but nobody came back for within this long is passed on:
# its waiter gave up writing.
UNCLAIMED_TURN = 0.2

_IDLE, _WAITING, _READY, _HELD = range(4)

# One lock per database file per process. The threads of one pool take turns for the write
# lock here, where a release wakes the next waiter at once, rather than in SQLite's busy
# handler, which sleeps 1, 2, 5, 10 ... ms between tries: under a busy pool that sleeping cost
# a quarter of all CPU samples. Separate processes still meet at SQLite's own lock.
_PROCESS_LOCKS: dict[str, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


def process_lock(location: str) -> threading.Lock:
    """The lock this process's writers to the database at `location` take turns at."""
    if location == ":memory:":
        return threading.Lock()  # every in-memory connection is a database of its own
    key = os.path.realpath(os.path.expanduser(location))
    with _PROCESS_LOCKS_GUARD:
        return _PROCESS_LOCKS.setdefault(key, threading.Lock())


class WriteTurn:
    """One store's place in the line for the write turn of the database at `location`."""

    def __init__(self, location: str, file_mode: int) -> None:
        self.path = location + LOCK_SUFFIX
        self._file_mode = file_mode
        self._fd: int | None = None
        self._can_ring = False  # the lock file is open for writing
        self._unusable = False  # no lock file could be opened: SQLite's lock alone decides
        self._state = _IDLE
        self._changed = threading.Condition(threading.Lock())
        self._helper: threading.Thread | None = None  # started the first time the turn is busy

    def acquire(self, timeout: float) -> bool:
        """Take the write turn, waiting up to `timeout` seconds. False when the wait ran out;
        the place in line is kept for the next call (see UNCLAIMED_TURN)."""
        with self._changed:
            fd = self._descriptor()
            if fd is None:
                return True
            if self._state == _IDLE:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    self._state = _WAITING
                    if self._helper is None:
                        self._helper = threading.Thread(
                            target=self._wait_in_line,
                            args=(fd,),
                            name="queuectl-write-turn",
                            daemon=True,
                        )
                        self._helper.start()
                    self._changed.notify_all()
                else:
                    self._state = _HELD
                    return True
            self._changed.wait_for(lambda: self._state == _READY, timeout)
            if self._state != _READY:
                return False
            self._state = _HELD
            self._changed.notify_all()
            return True

    def wait_until_passed(self) -> None:
        """Block while another store holds the turn: its transaction is then committed (or
        rolled back). For a reader that saw the WAL change and must see the commit. Creates no
        lock file; without one it returns at once."""
        with self._changed:
            if self._state != _IDLE:
                return  # this store holds the turn or waits for it: nobody else writes now
            fd = self._descriptor(create=False)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_SH)  # granted once no writer holds it
            fcntl.flock(fd, fcntl.LOCK_UN)

    def ring(self) -> None:
        """Tell the queue's pools that a commit may have given a worker work: one byte
        written to the lock file (see changes.py). Called by the turn's holder after its
        commit, so a pool that hears it sees the commit."""
        if self._can_ring and self._fd is not None:
            with contextlib.suppress(OSError):
                os.pwrite(self._fd, b"\0", 0)

    def bell_path(self) -> str | None:
        """The lock file's path, created (like the database) if it is missing, for a pool that
        listens to the bell; None if it cannot be made or opened."""
        with self._changed:
            return self.path if self._descriptor() is not None else None

    def release(self) -> None:
        with self._changed:
            if self._state != _HELD:
                return
            assert self._fd is not None
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._state = _IDLE

    def close(self) -> None:
        with self._changed:
            if self._fd is not None and self._state in (_IDLE, _HELD):
                os.close(self._fd)  # closing drops the flock
                self._fd, self._state = None, _IDLE
            # A helper still waiting closes nothing: it passes its turn on when it gets it.
            self._unusable = True
            self._changed.notify_all()

    def _wait_in_line(self, fd: int) -> None:
        """The helper thread: whenever the store waits, blocks in the kernel's queue for it,
        then offers the turn. It lives as long as the store (a thread per wait cost more than
        the wait under a busy producer)."""
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._state == _WAITING or self._unusable)
                if self._state != _WAITING:  # closed
                    return
            fcntl.flock(fd, fcntl.LOCK_EX)
            with self._changed:
                self._state = _READY
                self._changed.notify_all()
                self._changed.wait_for(lambda: self._state != _READY, UNCLAIMED_TURN)
                if self._state == _READY:  # nobody came back for it
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    self._state = _IDLE
                    if self._unusable and self._fd is not None:  # closed meanwhile
                        os.close(self._fd)
                        self._fd = None
                        return

    def _descriptor(self, create: bool = True) -> int | None:
        """The lock file, created like the database (with its file mode, never through a
        symlink) on the first write. A user who may not create or open it (a read-only
        folder, another user's queue) writes under SQLite's lock alone."""
        if self._fd is not None or self._unusable:
            return self._fd
        if not create and not os.path.lexists(self.path):
            return None  # nobody has written yet; a reader does not create it
        flags = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            create_exclusive(self.path, self._file_mode)
            try:
                fd = os.open(self.path, os.O_RDWR | flags)
                writable = True
            except OSError:  # somebody else's queue, or a read-only disk: no bell to ring
                fd = os.open(self.path, os.O_RDONLY | flags)
                writable = False
        except OSError as error:
            log.debug("no write-turn lock file %s: %s", self.path, error.strerror)
            self._unusable = True
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            self._unusable = True
            return None
        self._fd, self._can_ring = fd, writable
        return fd
