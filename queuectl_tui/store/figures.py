"""Figures every backend derives the same way from what it reads: latency summaries and the
per-minute rates folded from counts per 10 s."""

from __future__ import annotations

from collections.abc import Iterable

RATE_SLOT_MS = 10_000  # the width of a slot of the attempt rates (a count per 10 s)


def summary(values: list[int]) -> dict[str, float | None]:
    """The average, median and 95th percentile of `values` (None each when there are none)."""
    if not values:
        return {"avg": None, "p50": None, "p95": None}
    ordered = sorted(values)

    def pick(fraction: float) -> float:
        return float(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])

    return {"avg": sum(ordered) / len(ordered), "p50": pick(0.50), "p95": pick(0.95)}


def per_minute(
    slots: Iterable[tuple[int, int, int]], now: int, minutes: int
) -> tuple[list[int], list[int]]:
    """Completed and failed attempts in each of the last `minutes` minutes before `now`, oldest
    first, from (slot, completed, failed) counts per 10 s (a slot counts in the minute it
    starts in)."""
    since = now - minutes * 60_000
    completed = [0] * minutes
    failed = [0] * minutes
    for slot, done, failures in slots:
        index = min(max((slot * RATE_SLOT_MS - since) // 60_000, 0), minutes - 1)
        completed[index] += done
        failed[index] += failures
    return completed, failed
