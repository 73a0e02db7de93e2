"""Retrying store calls: a locked or broken database is logged and tried again with backoff,
never turned into a crash. Claims and settlements are fenced transactions, so a retry can
neither run nor record a job twice."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..store import StoreError
from . import events

T = TypeVar("T")

FIRST_DELAY = 0.05
MAX_DELAY = 5.0


def retry_store_call(
    what: str,
    call: Callable[[], T],
    give_up: Callable[[], bool] | None = None,
    **fields: Any,
) -> T | None:
    """Run `call` until it succeeds. Returns None only if `give_up()` turns true after a
    failure (a stopping pool); `fields` are added to the logged event."""
    delay = FIRST_DELAY
    while True:
        try:
            return call()
        except StoreError as error:
            events.event(
                "database error, retrying",
                level=logging.WARNING,
                **fields,
                action=what,
                retry_in_s=round(delay, 2),
                error=str(error),
            )
        if give_up is not None and give_up():
            return None
        time.sleep(delay)
        delay = min(delay * 2, MAX_DELAY)
