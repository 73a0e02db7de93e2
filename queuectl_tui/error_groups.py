"""Error groups: a failed run's fingerprint, so that a hundred jobs dying of one cause are one
row. The fingerprint is how the run ended (its exit, signal or timeout) and the last line it
printed, with what differs from job to job masked: numbers, hex, ids and paths. Pure code,
shared by every backend (each stores it with the job as it settles a failed run)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .timeutil import to_iso

MAX_FINGERPRINT = 200  # characters; what is past it tells no groups apart worth the room
_DROPPED = re.compile(r"^\[queuectl: \d+ earlier bytes of output dropped\]$")
# How the pool words the end of a run (runner.describe_exit): its exit code is kept as it is.
_EXIT = re.compile(r"^(?:exit code -?\d+(?: \([^)]*\))?|killed by [A-Z0-9]+)$")
# Most specific first: a UUID is hex and digits, a path may hold numbers.
_MASKS = (
    (re.compile(r"(?<=\bworker )\S+"), "<worker>"),
    (
        re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"),
        "<time>",
    ),
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<id>",
    ),
    (re.compile(r"(?<![\w.])(?:~|\.{1,2})?(?:/[^\s/'\"():,;]+)+/?"), "<path>"),
    (
        re.compile(
            r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"
        ),
        "<hex>",
    ),
    (re.compile(r"\d+(?:[.,:]\d+)*"), "<n>"),
)
_SPACES = re.compile(r"\s+")


def mask(text: str) -> str:
    """`text` with the parts that differ between runs of one failure masked."""
    for pattern, stand_in in _MASKS:
        text = pattern.sub(stand_in, text)
    return _SPACES.sub(" ", text).strip()


def last_output_line(output: str) -> str:
    """The last line a run printed that says something (not blank, not queuectl's note)."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line and not _DROPPED.match(line):
            return line
    return ""


def fingerprint(error: str | None, output: str) -> str:
    """What a failed run's group is known by: how it ended, and its last line, masked."""
    ended = error if error and _EXIT.match(error) else mask(error or "failed")
    line = mask(last_output_line(output))
    text = f"{ended} · {line}" if line else ended
    return text[:MAX_FINGERPRINT]


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    fingerprint: str
    count: int
    first_at: int | None  # when the earliest of its jobs ended (ms)
    last_at: int | None
    example: str  # the id of the job that ended last

    def to_dict(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "count": self.count,
            "first_seen": to_iso(self.first_at),
            "last_seen": to_iso(self.last_at),
            "example": self.example,
        }
