"""What every route of one server shares: its settings, its token gate, the group committer,
a store per thread (a store object serves one thread at a time) and the health check."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from .. import service
from ..config import ApiToken, Settings
from ..store import Store
from .auth import Gate
from .followers import Followers
from .health import HealthCheck
from .news import ChangeNews
from .submitter import Submitter

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ServeOptions:
    allow_commands: bool = False  # take jobs with a raw `command`, not only typed ones
    read_only: bool = False  # `queuectl dashboard --addr`: the dashboard and reads alone
    # The host names requests may address (against DNS rebinding); None: any, as behind a
    # proxy that checks them.
    hosts: frozenset[str] | None = None
    # The write token the server generated for itself, when no tokens are configured.
    generated: ApiToken | None = None


class Stores:
    """One store per worker thread, opened on first use, all closed at shutdown."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._local = threading.local()
        self._opened: list[Store] = []
        self._lock = threading.Lock()

    def _store(self) -> Store:
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            store = service.open_queue(self._settings)
            self._local.store = store
            with self._lock:
                self._opened.append(store)
        return store

    async def run(self, call: Callable[[Store], T]) -> T:
        """`call(store)` on a worker thread, so that the event loop never waits on SQLite."""
        return await run_in_threadpool(lambda: call(self._store()))

    def close(self) -> None:
        with self._lock:
            for store in self._opened:
                store.close()
            self._opened.clear()


@dataclass
class Context:
    settings: Settings
    options: ServeOptions
    gate: Gate
    stores: Stores
    submitter: Submitter
    health: HealthCheck
    followers: Followers = field(default_factory=Followers)  # output streams
    event_streams: Followers = field(default_factory=lambda: Followers(what="change events"))
    news: ChangeNews = field(init=False)  # the queue's changes, for GET /events
    # Set when the server begins to stop: open output streams end, so the stop is not held up.
    stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.news = ChangeNews(self.settings)


def context(request: Request) -> Context:
    found: Context = request.app.state.queuectl
    return found
