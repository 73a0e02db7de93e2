"""How many output streams a server has open (GET /output/{id}?follow=1), within a limit."""

from __future__ import annotations

from .errors import HttpError

MAX_FOLLOWERS = 64  # streams one server serves at once; one more gets 503


class Followers:
    def __init__(self, limit: int = MAX_FOLLOWERS) -> None:
        self.limit = limit
        self.open = 0

    def enter(self) -> None:
        """Count one more stream, or refuse it (503) at the limit."""
        if self.open >= self.limit:
            raise HttpError(
                503,
                f"the server is streaming output to {self.limit} clients; try again shortly",
                headers={"Retry-After": "5"},
            )
        self.open += 1

    def leave(self) -> None:
        self.open -= 1
