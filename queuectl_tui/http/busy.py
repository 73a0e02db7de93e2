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
# Set in the request's scope while it waits for a turn: its connection may then be closed to
# make room for another (transport.py), as an idle one may.
WAITING = "queuectl.waiting_for_turn"
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
        scope[WAITING] = True
        try:
            await asyncio.wait_for(self._turns.acquire(), WAIT_S)
        except TimeoutError:
            # The connection closes too: requests pipelined behind this one must not keep it
            # busy with a 503 each.
            busy = HttpError(
                503,
                f"the server is answering {self.limit} other reads; try again shortly",
                headers={"Retry-After": str(RETRY_AFTER_S), "Connection": "close"},
            )
            await busy.response()(scope, receive, send)
            return
        finally:
            scope[WAITING] = False
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
