"""Who may do what over HTTP: bearer tokens from config.json (`http_tokens`) or the
environment (QUEUECTL_READ_TOKEN, QUEUECTL_WRITE_TOKEN).

Without tokens the server answers everyone, which is safe only on a loopback address; so a
server on any other address must have tokens. With tokens, reads stay open but job output
(it may hold secrets) needs a token, and every write needs a write token."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Sequence

from starlette.requests import Request

from ..config import ApiToken
from ..models import Operator
from .errors import HttpError

ANONYMOUS = "anonymous"


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


class Gate:
    """The tokens a server knows, and the checks each request passes."""

    def __init__(self, tokens: Sequence[ApiToken]) -> None:
        self._tokens = tuple(tokens)

    @property
    def open(self) -> bool:
        """No tokens are set: every request may read and write."""
        return not self._tokens

    def token(self, request: Request) -> ApiToken | None:
        """The token the request carries; HttpError 401 for one that is not known."""
        header = request.headers.get("authorization")
        if header is None:
            return None
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret:
            raise HttpError(401, "use 'Authorization: Bearer TOKEN'", headers=_CHALLENGE)
        found = None
        given = secret.strip().encode()
        for token in self._tokens:  # each compared in constant time, and every one of them
            if hmac.compare_digest(given, token.secret.encode()):
                found = token
        if found is None:
            raise HttpError(401, "unknown token", headers=_CHALLENGE)
        return found

    def may_see_output(self, request: Request) -> bool:
        return self.open or self.token(request) is not None

    def writer(self, request: Request) -> Operator:
        """The operator of a write (for the audit trail); HttpError unless it may write."""
        client = request.client.host if request.client else "unknown"
        if self.open:
            return Operator("http", ANONYMOUS, client)
        token = self.token(request)
        if token is None:
            raise HttpError(401, "this needs a write token", headers=_CHALLENGE)
        if not token.write:
            raise HttpError(403, f"the token '{token.name}' may only read")
        return Operator("http", token.name, client)


_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="queuectl"'}
