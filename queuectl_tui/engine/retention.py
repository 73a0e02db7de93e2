"""Retention: a running pool removes finished jobs (and forgets ended workers) older than the
keep-* settings, a batch at a time, in a thread of its own so that neither its claims nor its
heartbeats wait behind it.

Each batch is one short transaction (see Store.prune); between batches the write turn goes to
whoever waits for it, and the thread pauses, so a backlog of a million old jobs is worked off
over minutes without holding up a claim for longer than one batch. Several pools may prune at
once: a job is deleted once, whoever gets there first."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..config import Settings
from ..models import JobState
from ..store import Store, StoreError
from . import events

RETENTION_INTERVAL = 60.0  # seconds between rounds
BATCH = 500  # jobs per transaction
PAUSE = 0.05  # seconds between batches of one round
DAY_MS = 86_400_000


def kept_days(settings: Settings) -> dict[JobState, float]:
    """The finished states a pool prunes, and after how many days (0: kept for good)."""
    days = {
        JobState.COMPLETED: settings.keep_completed_days,
        JobState.CANCELLED: settings.keep_cancelled_days,
        JobState.DEAD: settings.keep_dead_days,
    }
    return {state: value for state, value in days.items() if value > 0}


class Retention(threading.Thread):
    def __init__(self, open_store: Callable[[], Store], settings: Settings) -> None:
        super().__init__(name="queuectl-retention", daemon=True)
        self._open_store = open_store
        self._kept = kept_days(settings)
        self._workers_days = settings.keep_workers_days  # stopped and lost ones; 0: kept
        self._halt = threading.Event()
        self.removed = 0

    @property
    def needed(self) -> bool:
        return bool(self._kept) or self._workers_days > 0

    def describe(self) -> str:
        """'completed 7, cancelled 7, workers 7': what goes after how many days."""
        kept = [f"{state.value} {days:g}" for state, days in self._kept.items()]
        if self._workers_days > 0:
            kept.append(f"workers {self._workers_days:g}")
        return ", ".join(kept)

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        try:
            store = self._open_store()
        except StoreError as error:
            events.event("retention off", level=logging.WARNING, error=str(error))
            return
        try:
            while not self._halt.is_set():
                self._round(store)
                self._halt.wait(RETENTION_INTERVAL)
        finally:
            store.close()

    def _round(self, store: Store) -> None:
        removed: dict[str, Any] = {}
        for state, days in self._kept.items():
            before = store.now() - int(days * DAY_MS)
            try:
                count = store.prune_all(state, before, BATCH, lambda: self._halt.wait(PAUSE))
            except StoreError as error:
                events.event("retention retrying", level=logging.WARNING, error=str(error))
                return  # the next round tries again
            if count:
                removed[state.value] = count
        if self._workers_days > 0:
            try:
                workers = store.prune_workers(store.now() - int(self._workers_days * DAY_MS))
            except StoreError as error:
                events.event("retention retrying", level=logging.WARNING, error=str(error))
                return
            if workers:
                removed["workers"] = workers
        if removed:
            self.removed += sum(removed.values())
            events.event("pruned", **removed)
