"""What /proc/PID/stat says of a process: its state, process group and start time.

The fields after the command name are read from the last ")", since the name itself may hold
spaces and parentheses."""

from __future__ import annotations

import os

_GONE = (b"Z", b"X")  # a zombie, or dead


def stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (field 3 onwards), or None when the
    process or /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def is_live(fields: list[bytes]) -> bool:
    """Running or sleeping: neither a zombie nor dead."""
    return bool(fields) and fields[0] not in _GONE


def process_group(fields: list[bytes]) -> int:
    return int(fields[2])  # field 5


def start_ticks(fields: list[bytes]) -> int:
    """When the process started, in clock ticks since boot."""
    return int(fields[19])  # field 22


def cpu_ticks(fields: list[bytes]) -> int:
    """User plus system CPU time so far, in clock ticks."""
    return int(fields[11]) + int(fields[12])  # fields 14 and 15


def ticks_to_seconds(ticks: int) -> float:
    return ticks / os.sysconf("SC_CLK_TCK")


def pid_alive(pid: int) -> bool:
    """True if a process with this pid runs on this host (a zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = stat_fields(pid)
    return fields is None or is_live(fields)
