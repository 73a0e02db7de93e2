"""The database's WAL file, held open to sync the commit of a durable write."""

from __future__ import annotations

import os


class WalFile:
    """A read-only descriptor on the database's WAL, for fsync (Linux and the BSDs sync
    through any descriptor). Reopened when the WAL was replaced."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def sync(self) -> None:
        """Sync the WAL to disk: what SQLite's synchronous=FULL would sync at commit is exactly
        this file. If a checkpoint has meanwhile copied the commit into the database, SQLite
        synced that first (it syncs the database after every checkpoint, even in NORMAL
        mode). Raises OSError."""
        if self._fd is None or os.fstat(self._fd).st_nlink == 0:  # none yet, or replaced
            self._reopen()
        if self._fd is not None:
            os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _reopen(self) -> None:
        self.close()
        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            self._fd = None  # no WAL now: the commit is in the database, synced
