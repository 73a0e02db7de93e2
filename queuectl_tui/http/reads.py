"""What the queue looks like, over HTTP: status, stats, queues, workers, health."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import control, service
from ..models import JobState, QueueInfo, Worker
from ..store import Store
from .context import context
from .errors import HttpError
from .requests import queue_param


async def status(request: Request) -> Response:
    queue = queue_param(request)
    counts = await context(request).stores.run(lambda store: service.queue_status(store, queue))
    return JSONResponse(counts.to_dict())


async def stats(request: Request) -> Response:
    queue = queue_param(request)
    result = await context(request).stores.run(lambda store: service.queue_stats(store, queue))
    return JSONResponse(result.to_dict())


async def queues(request: Request) -> Response:
    def read(store: Store) -> tuple[list[QueueInfo], int]:
        return control.queue_overview(store), store.now()  # for the ages

    found, now = await context(request).stores.run(read)
    return JSONResponse({"queues": [queue.to_dict(now) for queue in found]})


async def error_groups(request: Request) -> Response:
    """GET /dlq/groups: dead jobs grouped by how they failed (?state=failed: failed ones)."""
    asked = request.query_params.get("state", "dead")
    if asked not in ("dead", "failed"):
        raise HttpError(422, "state must be 'dead' or 'failed'", "state")
    state = JobState(asked)
    found = await context(request).stores.run(lambda store: service.error_groups(store, state))
    return JSONResponse({"state": state.value, "groups": [group.to_dict() for group in found]})


async def workers(request: Request) -> Response:
    ctx = context(request)
    stale = ctx.settings.stale_worker_timeout
    active_only = _flag(request, "active", False)
    history = _flag(request, "history", True)

    def read(store: Store) -> tuple[list[Worker], int]:
        found = service.shown_workers(store, stale, active_only, history)
        return found, store.now()  # for the ages

    found, now = await ctx.stores.run(read)
    return JSONResponse(workers_view(found, stale, now))


def _flag(request: Request, name: str, default: bool) -> bool:
    value = request.query_params.get(name)
    if value is None:
        return default
    if value not in ("1", "true", "0", "false"):
        raise HttpError(422, f"{name} must be 1, true, 0 or false", name)
    return value in ("1", "true")


def workers_view(found: list[Worker], stale_after_s: float, now: int) -> dict[str, Any]:
    """The body of GET /workers (the dashboard's page renders the same shape)."""
    return {
        "workers": [
            worker.to_dict() | {"heartbeat_age_s": max(0, now - worker.last_heartbeat) / 1000}
            for worker in found
        ],
        "stale_after_s": stale_after_s,
    }


async def healthz(request: Request) -> Response:
    """200 while the database answers a read; 503 with the reason when it does not. Open to
    all (probes carry no token), so the reason names no path, host or error text."""
    problem = await context(request).health.problem()  # on a thread of its own
    if problem is not None:
        return JSONResponse({"ok": False, "error": problem}, 503)
    return JSONResponse({"ok": True})


ROUTES = [
    Route("/status", status, methods=["GET"]),
    Route("/stats", stats, methods=["GET"]),
    Route("/queues", queues, methods=["GET"]),
    Route("/workers", workers, methods=["GET"]),
    Route("/dlq/groups", error_groups, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
]
