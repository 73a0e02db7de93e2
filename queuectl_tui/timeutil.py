"""Time helpers: the store keeps UTC epoch milliseconds, people read ISO 8601."""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_MS = timedelta(milliseconds=1)
# The Gregorian calendar repeats every 400 years, which is what lets to_iso name any instant.
_MS_PER_400_YEARS = 146_097 * 86_400_000
_YEAR_2000_MS = 946_684_800_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def to_iso(ms: int | None) -> str | None:
    """Epoch milliseconds as ISO 8601 UTC to the millisecond: 2026-07-24T10:00:00.000Z.

    Never raises, whatever the database holds: years outside 0000-9999 are written in the
    expanded form with a sign and six digits (+010000-01-01T00:00:00.000Z), as JavaScript
    does, and a value that is not a number at all is shown as it is."""
    if ms is None:
        return None
    if isinstance(ms, float) and math.isfinite(ms):
        ms = math.floor(ms)
    if not isinstance(ms, int):
        return str(ms)
    cycles = (ms - _YEAR_2000_MS) // _MS_PER_400_YEARS  # shift into 2000-2399, exactly
    dt = _EPOCH + timedelta(milliseconds=ms - cycles * _MS_PER_400_YEARS)
    year = dt.year + 400 * cycles
    year_text = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+07d}"
    return f"{year_text}{dt.strftime('-%m-%dT%H:%M:%S')}.{ms % 1000:03d}Z"


def to_iso_seconds(ms: int | None) -> str:
    """An instant for people, to the second and without the T: 2026-07-24 10:00:00."""
    text = to_iso(ms)
    if text is None:
        return ""
    return text.split(".", 1)[0].replace("T", " ", 1)


def parse_iso(text: str) -> int:
    """ISO 8601 text as epoch milliseconds; a time without an offset is UTC.

    Raises ValueError for text that is not an ISO 8601 date or date-time.
    """
    cleaned = text.strip()
    if cleaned.endswith(("Z", "z")):
        cleaned = cleaned[:-1] + "+00:00"
    dt = datetime.fromisoformat(cleaned)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return (dt - _EPOCH) // _ONE_MS


def human_age(ms: int | None, now: int) -> str:
    """A short relative age such as '3s', '4m', '2h', '5d' (empty for None)."""
    if ms is None:
        return ""
    seconds = max(0, (now - ms) // 1000)
    return human_seconds(seconds)


def rough_age(ms: int | None, now: int) -> str:
    """An age for a table cell that changes at most once a minute past the first minute
    ('43s', '10m', '2h05m', '5d04h'): a screen of rows redrawn each second costs a console
    ten times the CPU of one redrawn each minute."""
    if ms is None:
        return ""
    seconds = max(0, (now - ms) // 1000)
    if 60 <= seconds < 3600:
        return f"{seconds // 60}m"
    return human_seconds(seconds)


def human_seconds(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d{(seconds % 86400) // 3600:02d}h"


_DURATION_UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration(text: str) -> int:
    """'90s', '30m', '12h', '7d' or '2w' as milliseconds; ValueError for anything else."""
    value = text.strip().lower()
    unit = _DURATION_UNITS.get(value[-1:]) if value else None
    number = value[:-1].strip()
    if unit is None or not (number.isascii() and number.isdigit()) or len(number) > 9:
        raise ValueError(f"{text!r} is not a duration like 90s, 30m, 12h, 7d or 2w")
    return int(number) * unit
