"""An operator's control over HTTP: cancel, retry, delete, the DLQ, pause and resume, prune,
stopping pools.
Each is the service call the CLI and the console make, recorded in the audit trail with
face "http" and the token's name; each needs the write token when tokens are set."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import control, service
from ..errors import InvalidInput
from ..models import JobState, Operator
from ..store import Store
from ..timeutil import parse_duration
from .context import context
from .errors import HttpError
from .requests import checked_queue, json_body, no_body


def _one_job(report: control.Report, job_id: str, verb: str, refusal: str) -> Response:
    """The answer for an action on one job: 200 done, 202 being stopped, 409, 404."""
    if report.missing:
        raise HttpError(404, f"no job with id '{job_id}'", "id")
    if report.unchanged:
        [(_, state)] = report.unchanged
        why = report.reasons.get(job_id, refusal)
        raise HttpError(409, f"job '{job_id}' is {state.value}: {why}")
    if report.pending_stop:
        return JSONResponse({"id": job_id, "result": "stopping"}, 202)
    return JSONResponse({"id": job_id, "result": verb})


def _on_one_job(
    act: Callable[[Store, list[str], Operator], control.Report], verb: str, refusal: str
) -> Callable[[Request], Awaitable[Response]]:
    """The route of one operator's action on the job the path names."""

    async def route(request: Request) -> Response:
        ctx, job_id = context(request), request.path_params["job_id"]
        who = ctx.gate.writer(request)
        await no_body(request, ctx.settings.http_body_limit)
        report = await ctx.stores.run(lambda store: act(store, [job_id], who))
        return _one_job(report, job_id, verb, refusal)

    return route


cancel = _on_one_job(control.cancel_jobs, "cancelled", "nothing to cancel")
retry = _on_one_job(
    control.retry_jobs, "retried", "only dead, cancelled and failed jobs are retried"
)
delete = _on_one_job(
    control.delete_jobs, "deleted", "a running job is not deleted; cancel it first"
)


async def retry_dead(request: Request) -> Response:
    """POST /dlq/retry: every dead job, or {"ids": [...]}."""
    ctx = context(request)
    who = ctx.gate.writer(request)
    body = await json_body(request, ctx.settings.http_body_limit)
    ids = _ids(body)
    outcome = await ctx.stores.run(lambda store: control.retry_dead(store, ids, who))
    return JSONResponse(
        {"retried": outcome.retried, "not_dead": outcome.not_dead, "unknown": outcome.unknown}
    )


async def act_on_group(request: Request) -> Response:
    """POST /dlq/groups/retry or /dlq/groups/delete: {"fingerprint": "..."} (dlq groups)."""
    ctx = context(request)
    who = ctx.gate.writer(request)
    body = await json_body(request, ctx.settings.http_body_limit)
    fingerprint = body.get("fingerprint") if isinstance(body, dict) else None
    if not isinstance(fingerprint, str) or not fingerprint or set(body) != {"fingerprint"}:
        raise HttpError(
            422, 'send {"fingerprint": "..."} as GET /dlq/groups gives it', "fingerprint"
        )
    call = control.retry_group if request.url.path.endswith("/retry") else control.delete_group
    report = await ctx.stores.run(lambda store: call(store, fingerprint, who))
    return JSONResponse({"done": report.done, "unchanged": [i for i, _ in report.unchanged]})


def _ids(body: Any) -> list[str] | None:
    if body is None or body == {}:
        return None
    ids = body.get("ids") if isinstance(body, dict) else None
    if (
        not isinstance(ids, list)
        or not ids
        or not all(isinstance(job_id, str) and job_id for job_id in ids)
        or set(body) != {"ids"}
    ):
        raise HttpError(422, 'send {} for every dead job, or {"ids": ["id", ...]}', "ids")
    return ids


async def pause(request: Request) -> Response:
    return await _set_paused(request, True)


async def resume(request: Request) -> Response:
    return await _set_paused(request, False)


async def _set_paused(request: Request, paused: bool) -> Response:
    ctx = context(request)
    who = ctx.gate.writer(request)
    await no_body(request, ctx.settings.http_body_limit)
    name = checked_queue(request.path_params["name"], "name")
    await ctx.stores.run(lambda store: control.set_paused(store, name, paused, who))
    return JSONResponse({"queue": name, "paused": paused})


async def prune(request: Request) -> Response:
    """POST /prune {"states": ["completed"], "older_than": "7d", "dry_run": false}."""
    ctx = context(request)
    who = ctx.gate.writer(request)
    body = await json_body(request, ctx.settings.http_body_limit)
    if not isinstance(body, dict) or not set(body) <= {"states", "older_than", "dry_run"}:
        raise HttpError(422, 'send {"states": [...], "older_than": "7d", "dry_run": false}')
    states = _states(body.get("states"))
    try:
        age = parse_duration(str(body.get("older_than", "")))
    except ValueError as error:
        raise HttpError(422, f"older_than: {error}", "older_than") from None
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise HttpError(422, "dry_run must be true or false", "dry_run")
    try:
        control.check_prunable(states)
    except InvalidInput as error:
        raise HttpError(422, str(error), "states") from None
    count = await ctx.stores.run(
        lambda store: control.prune(store, states, age, who, dry_run=dry_run)
    )
    return JSONResponse({"states": [s.value for s in states], "dry_run": dry_run, "jobs": count})


async def stop_pools(request: Request) -> Response:
    """POST /pools/stop {"pool": id or null, "force": false}: every running pool, or the one
    named (its id or one of its workers' ids; 404 if none runs), asked to stop."""
    ctx = context(request)
    who = ctx.gate.writer(request)
    body = await json_body(request, ctx.settings.http_body_limit)
    body = {} if body is None else body
    if not isinstance(body, dict) or not set(body) <= {"pool", "force"}:
        raise HttpError(422, 'send {"pool": "HOST:PID-TAG" or null, "force": false}')
    pool, force = body.get("pool"), body.get("force", False)
    if pool is not None and (not isinstance(pool, str) or not pool or len(pool) > 1000):
        raise HttpError(422, "pool must be a pool's or a worker's id, or null", "pool")
    if not isinstance(force, bool):
        raise HttpError(422, "force must be true or false", "force")
    stale = ctx.settings.stale_worker_timeout
    asked = await ctx.stores.run(lambda store: service.stop_pools(store, stale, who, pool, force))
    pools = sorted({worker.pool_id for worker in asked})
    return JSONResponse({"pools": pools, "workers": len(asked), "forced": force}, 202)


def _states(value: Any) -> list[JobState]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise HttpError(422, 'states must be a list such as ["completed"]', "states")
    try:
        return [JobState(name) for name in value]
    except ValueError:
        raise HttpError(422, "states must be completed, cancelled or dead", "states") from None


ROUTES = [
    Route("/jobs/{job_id:path}/cancel", cancel, methods=["POST"]),
    Route("/jobs/{job_id:path}/retry", retry, methods=["POST"]),
    Route("/jobs/{job_id:path}", delete, methods=["DELETE"]),
    Route("/dlq/retry", retry_dead, methods=["POST"]),
    Route("/dlq/groups/retry", act_on_group, methods=["POST"]),
    Route("/dlq/groups/delete", act_on_group, methods=["POST"]),
    Route("/queues/{name}/pause", pause, methods=["POST"]),
    Route("/queues/{name}/resume", resume, methods=["POST"]),
    Route("/prune", prune, methods=["POST"]),
    Route("/pools/stop", stop_pools, methods=["POST"]),
]
