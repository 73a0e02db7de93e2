"""Who may do what over HTTP: bearer tokens from config.json (`http_tokens`) or the
environment (QUEUECTL_READ_TOKEN, QUEUECTL_WRITE_TOKEN), else the write token the server
generated for itself (queuectl_tui/http_token.py).

With tokens configured, every route but /healthz and the page's static files needs one, and
every write a write token. Without them (on loopback only), anonymous clients may read and
submit typed jobs; a raw command and every operator's action need the generated token: being
on this machine is not enough, since every local user is."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote

from starlette.requests import HTTPConnection, Request
from starlette.types import Scope

from ..config import ApiToken
from ..models import Operator
from .errors import HttpError

ANONYMOUS = "anonymous"
TOKEN_SCOPE_KEY = "queuectl.token"  # the token the guard found for a request (or None)
COOKIE_PREFIX = "queuectl_token_"
QUERY_TOKEN = "token"  # GET /?token=TOKEN: a browser's way in
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="queuectl"'}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_refusal(host: str, tokens: Sequence[ApiToken]) -> str:
    """Why the server must not listen on `host` ('' when it may)."""
    if tokens or is_loopback(host):
        return ""
    return (
        f"refusing to listen on {host} without tokens: anyone who reaches it could run jobs; "
        "set http_tokens in config.json or QUEUECTL_WRITE_TOKEN (or bind 127.0.0.1)"
    )


def weak_token_refusal(tokens: Sequence[ApiToken]) -> str:
    """Why the server must not start with these tokens ('' when it may)."""
    return next((reason for reason in (t.weakness() for t in tokens) if reason), "")


@dataclass(frozen=True, slots=True)
class Presented:
    """A credential a request carries, not yet checked: its text and where it was found."""

    secret: str
    where: str  # 'bearer token', 'cookie', '?token=': for the log line


def cookie_name(scope: Scope) -> str:
    """One cookie per port: browsers share cookies between the ports of one host."""
    server = scope.get("server")
    port = server[1] if server and server[1] is not None else 0
    return f"{COOKIE_PREFIX}{port}"


def cookie_value(secret: str) -> str:
    return quote(secret, safe="")


class Gate:
    """The tokens a server knows, and the checks each request passes."""

    def __init__(self, tokens: Sequence[ApiToken], generated: ApiToken | None = None) -> None:
        self._configured = tuple(tokens)
        self._generated = None if self._configured else generated
        self._known = self._configured or ((generated,) if generated else ())

    @property
    def reads_need_token(self) -> bool:
        """Tokens are configured: nothing but /healthz and static files is anonymous."""
        return bool(self._configured)

    @property
    def generated(self) -> ApiToken | None:
        """The generated token, when it is the server's only one."""
        return self._generated

    def presented(self, request: HTTPConnection, method: str) -> Presented | None:
        """The credential of the request, or None. A browser's cookie and `/?token=` count
        for reads only (a write must say who it is, so no page can borrow them).
        HttpError 401 for an Authorization header that is not a bearer token."""
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, secret = header.partition(" ")
            if scheme.lower() != "bearer" or not secret.strip():
                raise HttpError(401, "use 'Authorization: Bearer TOKEN'", headers=CHALLENGE)
            return Presented(secret.strip(), "bearer token")
        if method not in ("GET", "HEAD"):
            return None
        if request.url.path == "/" and QUERY_TOKEN in request.query_params:
            return Presented(request.query_params[QUERY_TOKEN], "?token=")
        cookie = request.cookies.get(cookie_name(request.scope))
        if cookie:
            return Presented(unquote(cookie), "cookie")
        return None

    def identify(self, secret: str) -> ApiToken | None:
        """The known token `secret` is, compared in constant time with each of them."""
        found = None
        given = secret.encode()
        for token in self._known:
            if hmac.compare_digest(given, token.secret.encode()):
                found = token
        return found

    def token(self, request: Request) -> ApiToken | None:
        """The token the request proved it holds (found by the guard), or None."""
        found: ApiToken | None = request.scope.get(TOKEN_SCOPE_KEY)
        return found

    def may_see_output(self, request: Request) -> bool:
        return not self.reads_need_token or self.token(request) is not None

    def read_refusal(self) -> HttpError:
        return HttpError(
            401,
            "this server needs a token to read: send 'Authorization: Bearer TOKEN', or in a "
            "browser sign in on the page at /",
            headers=CHALLENGE,
        )

    def writer(self, request: Request, typed_submission: bool = False) -> Operator:
        """The operator of a write (for the audit trail); HttpError unless it may write.
        Without configured tokens a typed submission is the only anonymous write."""
        client = request.client.host if request.client else "unknown"
        token = self.token(request)
        if token is None:
            if typed_submission and not self.reads_need_token:
                return Operator("http", ANONYMOUS, client)
            raise HttpError(401, self._write_needs(), headers=CHALLENGE)
        if not token.write:
            raise HttpError(403, f"the token '{token.name}' may only read")
        return Operator("http", token.name, client)

    def _write_needs(self) -> str:
        if self._generated is not None:
            return (
                "this needs the server's token: it is "
                f"{self._generated.origin} (`queuectl serve --show-token` prints it); send "
                "'Authorization: Bearer TOKEN'"
            )
        return "this needs a write token: send 'Authorization: Bearer TOKEN'"
