"""How many streams of one kind a server has open (output followed with
`GET /output/{id}?follow=1`, change events from `GET /events`), within a limit, and the
response that counts itself among them while it streams."""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .errors import HttpError

MAX_FOLLOWERS = 64  # streams of one kind one server serves at once; one more gets 503


class Followers:
    def __init__(self, limit: int = MAX_FOLLOWERS, what: str = "output") -> None:
        self.limit = limit
        self.what = what  # what the streams carry, for the refusal
        self.open = 0

    def enter(self) -> None:
        """Count one more stream, or refuse it (503) at the limit."""
        if self.open >= self.limit:
            raise HttpError(
                503,
                f"the server is streaming {self.what} to {self.limit} clients; try again shortly",
                headers={"Retry-After": "5"},
            )
        self.open += 1

    def leave(self) -> None:
        self.open -= 1


class FollowerStream(StreamingResponse):
    """Server-sent events that count themselves among `followers` until they are over."""

    def __init__(self, followers: Followers, content: AsyncIterator[str]) -> None:
        super().__init__(
            content, media_type="text/event-stream", headers={"X-Accel-Buffering": "no"}
        )
        self.followers = followers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.followers.leave()
