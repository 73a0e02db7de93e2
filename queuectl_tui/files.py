"""Files queuectl creates (the database, the workers log, the config file): created with the
permissions of the file-mode setting whatever the umask, and never through a planted
symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from .errors import Unavailable

DEFAULT_FILE_MODE = 0o600  # only the owner: job output may hold secrets


class UnsafeFileError(Unavailable, OSError):
    """A file queuectl was to create or append to could not be opened safely."""


def create_exclusive(path: str | Path, mode: int) -> bool:
    """Create `path` empty with exactly `mode`. False if something exists there already (it
    is left as it is, mode included); never follows a symlink."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, mode)  # the umask may have taken bits away
    finally:
        os.close(fd)
    return True


def open_for_append(path: str | Path, mode: int) -> BinaryIO:
    """Open a log file for appending, creating it with `mode`. A symlink or anything but a
    regular file at `path` is refused: a planted link must not redirect what queuectl writes."""
    try:
        create_exclusive(path, mode)
        # O_NONBLOCK: a FIFO planted here must not block the open; it is refused below.
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(path, flags)
    except OSError as error:
        if os.path.islink(path):
            raise UnsafeFileError(
                f"{path} is a symbolic link; refusing to write through it"
            ) from None
        raise UnsafeFileError(f"cannot open {path}: {error.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeFileError(f"{path} is not a regular file; refusing to write to it")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "ab")
