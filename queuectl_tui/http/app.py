"""The ASGI application of `queuectl serve` (and, read-only, of `queuectl dashboard --addr`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Settings
from ..errors import Conflict, Damaged, InvalidInput, NotFound, Unavailable
from ..store import StoreError
from . import control, dashboard, events, jobs, metrics_routes, output, reads, schedules
from .access_log import AccessLog
from .auth import Gate
from .busy import ExpensiveReads
from .context import Context, ServeOptions, Stores
from .errors import HttpError
from .guard import RequestGuard
from .health import HealthCheck
from .openapi import document
from .submitter import Submitter

# No script, style, frame or connection but the server's own; nothing may frame the page.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
log = logging.getLogger("uvicorn.error")
_SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


class SecurityHeaders:
    """Every response gets the headers above (no CORS header is ever sent)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


async def _openapi(request: Request) -> Response:
    return JSONResponse(document(request.app.state.queuectl.options.read_only))


def _errors() -> dict[type[Exception] | int, object]:
    async def http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HttpError)
        return error.response()

    async def not_found(request: Request, error: Exception) -> Response:
        return HttpError(404, str(error), "id").response()

    async def invalid(request: Request, error: Exception) -> Response:
        return HttpError(422, str(error), getattr(error, "field", None)).response()

    async def conflict(request: Request, error: Exception) -> Response:
        return HttpError(409, str(error)).response()

    async def unavailable(request: Request, error: Exception) -> Response:
        return HttpError(503, str(error)).response()

    async def no_route(request: Request, error: Exception) -> Response:
        return HttpError(404, f"no such resource: {request.url.path}").response()

    async def wrong_method(request: Request, error: Exception) -> Response:
        if request.app.state.queuectl.options.read_only:
            message = "this server only reads (queuectl dashboard --addr); queuectl serve writes"
            return HttpError(405, message).response()
        return HttpError(405, f"{request.method} is not allowed here").response()

    async def gone(request: Request, error: Exception) -> Response:
        # Not an error of the server: one line, and an answer nobody will read.
        peer = request.client.host if request.client else "?"
        log.warning(
            "%s: connection closed before all of %s %s arrived",
            peer,
            request.method,
            request.url.path,
        )
        return HttpError(400, "the connection closed before the request arrived").response()

    async def unexpected(request: Request, error: Exception) -> Response:
        # Answered outside the middleware that adds the security headers: added here.
        headers = {name.decode(): value.decode() for name, value in _SECURITY_HEADERS}
        failed = HttpError(500, "internal error; the server log has the details")
        return failed.response(headers)

    return {
        HttpError: http_error,
        NotFound: not_found,
        InvalidInput: invalid,
        Conflict: conflict,
        StoreError: unavailable,
        Unavailable: unavailable,
        Damaged: unavailable,
        ClientDisconnect: gone,
        404: no_route,
        405: wrong_method,
        Exception: unexpected,
    }


def create_app(settings: Settings, options: ServeOptions | None = None) -> Starlette:
    options = options or ServeOptions()
    ctx = Context(
        settings,
        options,
        Gate(settings.tokens, options.generated),
        Stores(settings),
        Submitter(settings),
        HealthCheck(settings),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        ctx.submitter.start()
        try:
            yield
        finally:
            ctx.submitter.stop()
            ctx.news.close()
            ctx.stores.close()
            ctx.health.close()

    routes: list[BaseRoute] = [Route("/openapi.json", _openapi, methods=["GET"])]
    routes += reads.ROUTES + metrics_routes.ROUTES + output.ROUTES + events.ROUTES
    routes += schedules.READ_ROUTES
    if options.read_only:
        routes += jobs.READ_ROUTES + dashboard.ROUTES
    else:
        routes += control.ROUTES + schedules.ROUTES + jobs.ROUTES + dashboard.ROUTES
    app = Starlette(
        routes=routes,
        # Starlette types a handler as taking Exception; each of ours takes its own kind.
        exception_handlers=_errors(),  # type: ignore[arg-type]
        lifespan=lifespan,
    )
    app.state.queuectl = ctx
    app.add_middleware(ExpensiveReads, limit=settings.http_read_concurrency)
    app.add_middleware(RequestGuard, gate=ctx.gate, hosts=options.hosts)
    app.add_middleware(SecurityHeaders)
    if settings.http_access_log == "on":
        app.add_middleware(AccessLog)  # outside ours: it sees every answer, refusals too
    return app
