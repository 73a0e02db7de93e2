"""Loaded by every Python process started with this folder on PYTHONPATH (see
scripts/measure_mixed_cpu.py --timings): times the dispatcher's calls, wall clock and the
calling thread's CPU, and writes the totals to $QUEUECTL_TIMINGS_DIR/PID.json at exit."""

from __future__ import annotations

import atexit
import functools
import json
import os
import time
from collections.abc import Callable
from typing import Any

_totals: dict[str, list[float]] = {}  # name: [wall seconds, CPU seconds, calls]


def _timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            total = _totals.setdefault(name, [0.0, 0.0, 0])
            total[0] += time.perf_counter() - wall
            total[1] += time.thread_time() - cpu
            total[2] += 1

    return timed


def _install() -> None:
    from queuectl_tui.engine.dispatch import Dispatcher

    os.posix_spawn = _timed("posix_spawn", os.posix_spawn)
    Dispatcher._send = _timed("exchange", Dispatcher._send)  # type: ignore[method-assign]
    Dispatcher._start_claimed = _timed("start", Dispatcher._start_claimed)  # type: ignore[method-assign]


def _write() -> None:
    if _totals:
        path = os.path.join(os.environ["QUEUECTL_TIMINGS_DIR"], f"{os.getpid()}.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(_totals, handle)


if os.environ.get("QUEUECTL_TIMINGS_DIR"):
    _install()
    atexit.register(_write)
