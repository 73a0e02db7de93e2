"""The database server's clock as one process sees it.

Every host stamps and judges jobs by the server's clock, whatever its own says. A process
reads that clock every CLOCK_RESYNC seconds and carries it forward by its monotonic clock
meanwhile. There is one reading per server and process, shared by all its stores (a pool's
dispatcher, its main thread and its schedule ticker open stores of their own, with different
plan settings): two readings would disagree by up to half a round trip, and a due time one
thread saw arrive would not yet have arrived for a claim another makes. What it tells never
goes back, so a time one thread found due stays due for every thread that asks after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..base import StoreError

CLOCK_RESYNC = 10.0  # seconds between two readings of the server's clock

# Reads the server's clock within `wait` seconds: (server ms, this host's monotonic s).
Reader = Callable[[float], tuple[int, float]]


class ServerClock:
    """One server's clock in one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._anchor: tuple[int, float] | None = None  # (server ms, our monotonic s)
        self._reading = False  # a caller is reading the server's clock now
        self._told = 0  # the latest time told: never tell an earlier one

    def now(self, read: Reader, first_wait: float, later_wait: float) -> int:
        """The server's time in ms. One caller reads the server again when the reading is
        old while the others go on with it, so a slow or unreachable server never holds up a
        caller once there is a reading; only the first reading's failure is raised."""
        with self._lock:
            anchor = self._anchor
            due = anchor is None or time.monotonic() - anchor[1] > CLOCK_RESYNC
            reread = due and not self._reading
            if reread:
                self._reading = True
        if reread:
            try:
                fresh = read(first_wait if anchor is None else later_wait)
            except StoreError:
                if anchor is None:
                    raise
                fresh = None  # carry on with the last reading; try again next time
            finally:
                with self._lock:
                    self._reading = False
            if fresh is not None:
                with self._lock:
                    self._anchor = fresh
        elif anchor is None:  # another caller is taking the first reading: wait for it
            deadline = time.monotonic() + first_wait
            while self._anchor is None and self._reading and time.monotonic() < deadline:
                time.sleep(0.001)
            if self._anchor is None:
                return self.now(read, first_wait, later_wait)  # it failed: read it ourselves
        with self._lock:
            assert self._anchor is not None
            server_ms, at = self._anchor
            self._told = max(self._told, server_ms + round((time.monotonic() - at) * 1000))
            return self._told


_clocks: dict[str, ServerClock] = {}
_clocks_lock = threading.Lock()


def clock_of(conninfo: str) -> ServerClock:
    """The process's clock of the server `conninfo` names (a few bytes each, kept for the
    life of the process)."""
    with _clocks_lock:
        return _clocks.setdefault(conninfo, ServerClock())
