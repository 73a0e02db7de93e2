"""What a web page elsewhere could make a browser send to this server, refused before any
route runs: a write from a foreign origin (a page may post to any address without asking),
a request addressed to a host name that is not this server's (DNS rebinding: a page's own
name made to point at 127.0.0.1), and a request with a token the server does not know."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from .auth import Gate
from .errors import HttpError

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _host_name(host_header: str) -> str:
    """'localhost:8080' → 'localhost', '[::1]:8080' → '::1'."""
    return (urlsplit(f"//{host_header}").hostname or "").lower()


class RequestGuard:
    def __init__(self, app: ASGIApp, gate: Gate, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.gate = gate
        self.hosts = hosts  # the host names requests may address; None: any

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(Request(scope))
            if refusal is not None:
                await refusal.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, request: Request) -> HttpError | None:
        host = request.headers.get("host", "")
        if self.hosts is not None and _host_name(host) not in self.hosts:
            return HttpError(421, f"this server does not answer for the host {host!r}")
        if request.method not in SAFE_METHODS:
            origin = request.headers.get("origin")
            cross_site = request.headers.get("sec-fetch-site") == "cross-site"
            if cross_site or (origin is not None and urlsplit(origin).netloc != host):
                return HttpError(403, "a write from another site's page is refused")
        try:
            self.gate.token(request)  # an unknown token is refused on every route
        except HttpError as error:
            return error
        return None
