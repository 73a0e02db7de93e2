"""The schedule ticker: a thread of every running pool that makes the jobs of due schedule
ticks (schedules.py says when they fall and which a round fires).

It wakes at the earliest next tick and at least every CHECK_EVERY seconds (a schedule added
or resumed meanwhile is seen that soon: its first tick may be up to that late), and reads time
from the store's clock, the one every host shares. Each due schedule is fired in one
transaction (Store.fire_schedule): a compare-and-set on the schedule's next tick together with
the insert of the ticks' jobs. So no leader is needed: of several pools, on one host or many,
that race for a tick one makes its job and the others change nothing; a pool whose clock or
view is stale makes none.

As it starts, the ticker keeps the config file's schedules in step with the store (when the
file has a "schedules" key at all)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from ..config import Settings
from ..models import local_operator
from ..schedules import Schedule, ScheduleSpec, new_schedule, plan_round, tick_job
from ..store import Store, StoreError
from . import events

CHECK_EVERY = 1.0  # seconds: the longest the ticker sleeps (one read of the schedules)
MIN_SLEEP = 0.01
CONFIG = "config"


class ScheduleTicker(threading.Thread):
    def __init__(self, open_store: Callable[[], Store], settings: Settings) -> None:
        super().__init__(name="queuectl-ticker", daemon=True)
        self._open_store = open_store
        self._settings = settings
        self._declared: Mapping[str, ScheduleSpec] | None = settings.schedules
        self._halt = threading.Event()
        self._unreadable: set[str] = set()  # told once each
        self.fired = 0  # jobs made, for tests and the closing line

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        try:
            store = self._open_store()
        except StoreError as error:
            events.event("schedules off", level=logging.WARNING, error=str(error))
            return
        try:
            synced = False
            while not self._halt.is_set():
                if not synced:
                    synced = self._sync(store)
                self._halt.wait(self._round(store))
        finally:
            store.close()

    def _sync(self, store: Store) -> bool:
        """Bring the config file's schedules into the store; False to try again next round."""
        declared = self._declared
        if declared is None:
            return True
        now = store.now()
        rows = [new_schedule(name, spec, CONFIG, now) for name, spec in declared.items()]
        where = self._settings.config_file or "the config file"
        action = local_operator(CONFIG).action("schedule-sync", where, on_named_jobs=True)
        try:
            done = store.sync_schedules(rows, now, action)
        except StoreError as error:
            events.event("schedules retrying", level=logging.WARNING, error=str(error))
            return False
        if done.added or done.changed or done.removed:
            events.event(
                "schedules synced",
                added=",".join(done.added) or None,
                changed=",".join(done.changed) or None,
                removed=",".join(done.removed) or None,
            )
        for name in done.conflicts:
            events.event(
                "schedule not synced",
                level=logging.WARNING,
                schedule=name,
                reason="a schedule of that name was added by an operator; left alone",
            )
        return True

    def _round(self, store: Store) -> float:
        """Fire every due tick; returns the seconds until the next round."""
        upcoming: list[int] = []
        try:
            now = store.now()
            for schedule in store.schedules():
                if schedule.paused or schedule.next_at is None:
                    continue
                next_at: int | None = schedule.next_at
                if schedule.next_at <= now:
                    next_at = self._fire(store, schedule, now)
                if next_at is not None:
                    upcoming.append(next_at)
            now = store.now()
        except StoreError as error:
            events.event("schedules retrying", level=logging.WARNING, error=str(error))
            return CHECK_EVERY
        wait = (min(upcoming) - now) / 1000 if upcoming else CHECK_EVERY
        return min(CHECK_EVERY, max(MIN_SLEEP, wait))

    def _fire(self, store: Store, schedule: Schedule, now: int) -> int | None:
        """Fire a due schedule's ticks; returns its next tick after them, or None when that
        is not known here (another pool fired it first, or it cannot be read)."""
        assert schedule.next_at is not None
        try:
            spec = schedule.spec
        except (ValueError, KeyError, TypeError) as error:  # written by a newer version
            if schedule.name not in self._unreadable:
                self._unreadable.add(schedule.name)
                reason = f"its definition cannot be read ({error})"
                name = schedule.name
                events.event("schedule skipped", logging.WARNING, schedule=name, reason=reason)
            return None
        plan = plan_round(spec, schedule.next_at, now)
        specs = [tick_job(schedule.name, spec, tick) for tick in plan.fire]
        made = store.fire_schedule(
            schedule.name, schedule.next_at, plan.next_at, specs, self._settings.max_retries, now
        )
        if made is None:
            return None  # another pool fired it first, or it changed meanwhile: nothing done
        self.fired += len(made)
        events.event(
            "schedule fired",
            schedule=schedule.name,
            made=len(made),
            jobs=",".join(job.id for job in made) or None,
            missed="passed over" if plan.skipped else None,
        )
        return plan.next_at
