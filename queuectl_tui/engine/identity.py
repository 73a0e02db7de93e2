"""Who a pool is, and where its pid means something.

A pid names a process only within one PID namespace of one boot of one kernel: a pool in a
container, under `unshare --pid` or on another machine with the same hostname has pids that
say nothing about this process table. Each worker row records the PID namespace its pid
belongs to (`pid_namespace`), and a pool judges another pool by its pid only when both are
in the same one; elsewhere it goes by heartbeats alone, as for another host.
"""

from __future__ import annotations

import os
import secrets
import socket

# The inode of the initial PID namespace (PROC_PID_INIT_INO), the same on every Linux.
INITIAL_PID_NAMESPACE = 0xEFFFFFFC

_cached: tuple[int, str, int] | None = None  # (pid it was read in, key, namespace inode)
_tag: tuple[int, str] | None = None  # (pid it was drawn in, this process's random tag)
# The tag's letters: lower case and digits, no look-alikes (0/o, 1/l), so an id read aloud
# or copied by hand is the id.
_TAG_LETTERS = "23456789abcdefghijkmnpqrstuvwxyz"
TAG_LENGTH = 4


def _read() -> tuple[str, int]:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()
        inode = os.stat("/proc/self/ns/pid").st_ino
        # A /proc mounted for another PID namespace numbers processes differently from
        # os.getpid(): nothing it says of a pid could be trusted.
        if os.readlink("/proc/self") != str(os.getpid()):
            return "", 0
    except OSError:
        return "", 0
    return (f"{boot}:{inode}" if boot else ""), inode


def _namespace() -> tuple[str, int]:
    """(key, inode) of this process's PID namespace, read once per process (again in a
    forked child)."""
    global _cached
    pid = os.getpid()
    if _cached is None or _cached[0] != pid:
        _cached = (pid, *_read())
    return _cached[1], _cached[2]


def pid_namespace() -> str:
    """This boot's id and this process's PID namespace ("BOOT_ID:INODE"), or "" when unknown
    (no /proc, or one of another namespace): then no pid is ever judged by this process."""
    return _namespace()[0]


def same_pid_namespace(recorded: str) -> bool:
    """Whether a pid recorded with namespace `recorded` names a process of this table."""
    return recorded != "" and recorded == pid_namespace()


def _process_tag() -> str:
    """A random tag drawn once per process (again in a forked child)."""
    global _tag
    pid = os.getpid()
    if _tag is None or _tag[0] != pid:
        _tag = (pid, "".join(secrets.choice(_TAG_LETTERS) for _ in range(TAG_LENGTH)))
    return _tag[1]


def pool_id() -> str:
    """This pool process's id, which its workers' ids start with: HOST:PID, followed by
    @INODE of its PID namespace when that is not the host's initial one, then -TAG, random
    per process. Hostname, pid and namespace inode alone may repeat (containers that are
    pid 1 on hosts of one name, or without a /proc of their own); the tag keeps two pool
    processes apart. The same value all the process's life, a new one in a forked child."""
    inode = _namespace()[1]
    suffix = f"@{inode}" if inode not in (0, INITIAL_PID_NAMESPACE) else ""
    return f"{socket.gethostname()}:{os.getpid()}{suffix}-{_process_tag()}"
