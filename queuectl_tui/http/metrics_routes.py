"""GET /metrics: Prometheus text, or with `Accept: application/json` (and at /metrics.json)
the reference queue's JSON keys; read from the store's counters at scrape time."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import metrics
from .context import context


async def scrape(request: Request) -> Response:
    snapshot = await context(request).stores.run(metrics.read)
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse(metrics.summary(snapshot))
    body = metrics.prometheus_text(snapshot)
    return Response(body, media_type=metrics.PROMETHEUS_CONTENT_TYPE)


async def scrape_json(request: Request) -> Response:
    snapshot = await context(request).stores.run(metrics.read)
    return JSONResponse(metrics.summary(snapshot))


ROUTES = [
    Route("/metrics", scrape, methods=["GET"]),
    Route("/metrics.json", scrape_json, methods=["GET"]),
]
