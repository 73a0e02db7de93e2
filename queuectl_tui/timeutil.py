"""Time helpers: the store keeps UTC epoch milliseconds, people read ISO 8601."""

from __future__ import annotations

import time
from datetime import datetime, timezone


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def to_iso(ms: int | None) -> str | None:
    """Epoch milliseconds as ISO 8601 UTC to the millisecond: 2026-07-24T10:00:00.000Z."""
    if ms is None:
        return None
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


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
    return int(dt.timestamp() * 1000)


def human_age(ms: int | None, now: int) -> str:
    """A short relative age such as '3s', '4m', '2h', '5d' (empty for None)."""
    if ms is None:
        return ""
    seconds = max(0, (now - ms) // 1000)
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
