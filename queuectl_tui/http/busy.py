"""Expensive reads (pages of jobs, stats, metrics, the dashboard) answered a few at a time.

One past the limit waits a little for a turn (a dashboard and a scrape arriving together
should both be answered), then gets 503 with Retry-After: a flood of such reads neither holds
every thread of the pool nor queues without end. A turn ends when the answer is ready to
send, so that a client that does not read its answer holds none."""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import HttpError

EXPENSIVE = frozenset({"/", "/jobs", "/stats", "/metrics", "/metrics.json"})
WAIT_S = 2.0
RETRY_AFTER_S = 1


class ExpensiveReads:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self._turns = asyncio.Semaphore(limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] not in EXPENSIVE:
            await self.app(scope, receive, send)
            return
        try:
            await asyncio.wait_for(self._turns.acquire(), WAIT_S)
        except TimeoutError:
            busy = HttpError(
                503,
                f"the server is answering {self.limit} other reads; try again shortly",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
            await busy.response()(scope, receive, send)
            return
        held = True

        async def answering(message: Message) -> None:
            nonlocal held
            if held and message["type"] == "http.response.start":
                held = False
                self._turns.release()
            await send(message)

        try:
            await self.app(scope, receive, answering)
        finally:
            if held:
                self._turns.release()
