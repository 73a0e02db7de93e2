"""What every request passes before any route runs: a request addressed to a host name that
is not this server's is refused (DNS rebinding: a page's own name made to point at this
server), so is a write from a foreign origin (a page may post to any address without
asking); the token it carries is checked, in its address's turn, failures slowed down and
logged (throttle.py); and where tokens are configured, a request without one reads nothing.

A browser comes in with `GET /?token=TOKEN`: that sets an HttpOnly, SameSite=Strict cookie
and sends it on to `/`, so that the token leaves the address bar and the page's own fetches
carry the cookie."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..config import ApiToken
from ..display import printable
from .auth import CHALLENGE, TOKEN_SCOPE_KEY, Gate, Presented, cookie_name, cookie_value
from .errors import HttpError
from .throttle import WINDOW_S, Busy, FailureThrottle

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
# What a client without a token may still ask for when tokens are configured: a probe's
# health check, the page's script, styles and icon (code, no data), and the page itself,
# which then shows a sign-in form and no figures.
OPEN_PATHS = frozenset({"/healthz"})
OPEN_PREFIXES = ("/static/",)

log = logging.getLogger("queuectl.http")


def _host_name(host_header: str) -> str:
    """'localhost:8080' → 'localhost', '[::1]:8080' → '::1'."""
    try:
        return (urlsplit(f"//{host_header}").hostname or "").lower()
    except ValueError:  # '[x' and other broken brackets
        return ""


class RequestGuard:
    def __init__(self, app: ASGIApp, gate: Gate, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.gate = gate
        self.hosts = hosts  # the host names requests may address; None: any
        self.throttle = FailureThrottle()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            self._check_origin(request)
            token = await self._token(request)
            scope[TOKEN_SCOPE_KEY] = token
            if token is not None and self._browser_way_in(request):
                # Set the cookie, and send the browser on without the token in its address.
                answer = RedirectResponse("/", status_code=303)
                answer.set_cookie(
                    cookie_name(scope),
                    cookie_value(token.secret),
                    httponly=True,
                    samesite="strict",
                    path="/",
                )
                await answer(scope, receive, send)
                return
            if token is None and self.gate.reads_need_token and not _open(request):
                raise self.gate.read_refusal()
        except HttpError as error:
            await error.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _check_origin(self, request: Request) -> None:
        host = request.headers.get("host", "")
        if self.hosts is not None and _host_name(host) not in self.hosts:
            raise HttpError(421, f"this server does not answer for the host {host!r}")
        if request.method not in SAFE_METHODS:
            origin = request.headers.get("origin")
            cross_site = request.headers.get("sec-fetch-site") == "cross-site"
            if cross_site or (origin is not None and urlsplit(origin).netloc != host):
                raise HttpError(403, "a write from another site's page is refused")

    async def _token(self, request: Request) -> ApiToken | None:
        """The token the request carries, checked in its address's turn; None if it carries
        none. HttpError 401 for one the server does not know (an unknown token is refused on
        every route), 429 when too many requests with tokens wait already."""
        client = request.client.host if request.client else "unknown"
        try:
            presented = self.gate.presented(request, request.method)
        except HttpError:
            await self._failed(client, request, "an Authorization header that is not Bearer")
            raise
        if presented is None:
            return None
        try:
            token, failures = await self.throttle.check(
                client, lambda: self.gate.identify(presented.secret)
            )
        except Busy:
            raise HttpError(
                429,
                "too many requests with tokens from this address are waiting; try again later",
                headers={"Retry-After": "5"},
            ) from None
        if token is None:
            _log_failure(client, request, f"unknown {presented.where}", failures)
            if presented.where == "cookie" and _open(request):
                return None  # the page: its sign-in form (which also drops the cookie)
            raise HttpError(401, _unknown(presented), headers=CHALLENGE)
        return token

    async def _failed(self, client: str, request: Request, what: str) -> None:
        """A malformed credential counts as a failure too, in the address's turn."""
        try:
            _, failures = await self.throttle.check(client, lambda: None)
        except Busy:
            return
        _log_failure(client, request, what, failures)

    def _browser_way_in(self, request: Request) -> bool:
        return (
            request.method == "GET"
            and request.url.path == "/"
            and "token" in request.query_params
            and "authorization" not in request.headers
        )


def _unknown(presented: Presented) -> str:
    if presented.where == "cookie":
        return "the token in this browser's cookie is not known here; open /?token=TOKEN again"
    return "unknown token"


def _log_failure(client: str, request: Request, what: str, failures: int) -> None:
    path = printable(request.url.path, single_line=True)[:200]
    log.warning(
        "failed authentication: client %s, %s %s, %s (%d from this address in %d minutes)",
        client,
        printable(request.method, single_line=True)[:20],
        path,
        what,
        failures,
        WINDOW_S // 60,
    )


def _open(request: Request) -> bool:
    path = request.url.path
    if path == "/" and request.method in ("GET", "HEAD"):
        return True  # the page answers 401 with its sign-in form and no figures (dashboard.py)
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)
