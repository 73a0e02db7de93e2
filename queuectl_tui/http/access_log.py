"""One line per request on the server's log: who connected, what they asked, the status and
how long the answer took (a stream's line comes when it ends). Paths are shown with their
control characters escaped, and never with their query string, which may carry a secret."""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..display import printable

log = logging.getLogger("queuectl.http")


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            # Starlette's outermost layer turns it into a 500 after this line is written.
            status = status or 500
            raise
        finally:
            client = scope.get("client")
            who = f"{client[0]}:{client[1]}" if client else "-"
            # As sent (percent-encoded), so a client cannot write quotes or spaces into it.
            raw = scope.get("raw_path")
            sent = raw.decode("latin-1") if raw else scope.get("path", "")
            path = printable(sent.split("?", 1)[0], single_line=True)
            version = scope.get("http_version", "1.1")
            took = (time.monotonic() - started) * 1000
            log.info(
                '%s "%s %s HTTP/%s" %s %.1f ms',
                who,
                scope.get("method", "-"),
                path,
                version,
                status or "-",  # none sent: the client went away first
                took,
            )
