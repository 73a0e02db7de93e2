"""Schedules over HTTP: read them (GET /schedules, /schedules/{name}); add one, pause, resume,
run now and remove it, each the service call the CLI and the console make, recorded in the
audit trail with face "http" and the token's name. Every change needs the write token, a
schedule of a raw command also `--allow-commands`, as a job's does."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import schedule_ops
from ..errors import InvalidInput
from ..models import MASK, Operator
from .context import Context, context
from .errors import HttpError
from .jobs import job_view
from .requests import json_body, no_body


def schedule_view(view: schedule_ops.ScheduleView, with_secrets: bool) -> dict[str, Any]:
    """A schedule as the API gives it; without the right to see secrets, its job's payload
    and the values of its environment are left out (as a job's are)."""
    data = view.to_dict()
    if not with_secrets:
        job = data["job"]
        if "payload" in job:
            job["payload"] = None
        if "env" in job:
            job["env"] = dict.fromkeys(job["env"], MASK)
    return data


async def list_schedules(request: Request) -> Response:
    ctx = context(request)
    views = await ctx.stores.run(schedule_ops.list_schedules)
    secrets = ctx.gate.may_see_output(request)
    return JSONResponse({"schedules": [schedule_view(view, secrets) for view in views]})


async def get_schedule(request: Request) -> Response:
    ctx = context(request)
    name = request.path_params["name"]
    view = await ctx.stores.run(lambda store: schedule_ops.get_schedule(store, name))
    return JSONResponse(schedule_view(view, ctx.gate.may_see_output(request)))


async def add_schedule(request: Request) -> Response:
    """POST /schedules {"name": ..., "cron" or "every": ..., "command" or "type" ...}."""
    ctx = context(request)
    who = ctx.gate.writer(request)
    body = await json_body(request, ctx.settings.http_body_limit)
    if not isinstance(body, dict):
        raise HttpError(422, 'send {"name": ..., "cron": ..., "command": ...}', "name")
    fields = dict(body)
    name = fields.pop("name", None)
    if not isinstance(name, str):
        raise HttpError(422, "a schedule needs a 'name'", "name")
    if "command" in fields and not ctx.options.allow_commands:
        raise HttpError(
            403,
            "this server takes typed jobs only ('type' and 'payload'); a schedule of a raw "
            "'command' needs `queuectl serve --allow-commands`",
            "command",
        )
    settings = ctx.settings
    try:
        view = await ctx.stores.run(
            lambda store: schedule_ops.add_schedule(store, settings, name, fields, who)
        )
    except InvalidInput as error:
        raise HttpError(422, str(error), error.field) from None
    location = f"/schedules/{quote(view.name, safe='')}"
    return JSONResponse(schedule_view(view, True), 201, headers={"Location": location})


async def _named_write(request: Request) -> tuple[Context, Operator, str]:
    """A write on the schedule the path names: its writer (403 for a read token) and name;
    the request must have no body."""
    ctx = context(request)
    who = ctx.gate.writer(request)
    await no_body(request, ctx.settings.http_body_limit)
    return ctx, who, request.path_params["name"]


async def pause(request: Request) -> Response:
    ctx, who, name = await _named_write(request)
    view = await ctx.stores.run(lambda store: schedule_ops.pause_schedule(store, name, who))
    return JSONResponse(schedule_view(view, True))


async def resume(request: Request) -> Response:
    ctx, who, name = await _named_write(request)
    view = await ctx.stores.run(lambda store: schedule_ops.resume_schedule(store, name, who))
    return JSONResponse(schedule_view(view, True))


async def run(request: Request) -> Response:
    """One job of the schedule now: 201 with the job."""
    ctx, who, name = await _named_write(request)
    settings = ctx.settings
    job = await ctx.stores.run(lambda store: schedule_ops.run_schedule(store, settings, name, who))
    location = f"/jobs/{quote(job.id, safe='')}"
    return JSONResponse(job_view(job), 201, headers={"Location": location})


async def remove(request: Request) -> Response:
    ctx, who, name = await _named_write(request)
    gone = await ctx.stores.run(lambda store: schedule_ops.remove_schedule(store, name, who))
    return JSONResponse({"name": gone.name, "result": "removed"})


READ_ROUTES = [
    Route("/schedules", list_schedules, methods=["GET"]),
    Route("/schedules/{name:path}", get_schedule, methods=["GET"]),
]
ROUTES = [
    Route("/schedules", add_schedule, methods=["POST"]),
    Route("/schedules/{name:path}/pause", pause, methods=["POST"]),
    Route("/schedules/{name:path}/resume", resume, methods=["POST"]),
    Route("/schedules/{name:path}/run", run, methods=["POST"]),
    Route("/schedules/{name:path}", remove, methods=["DELETE"]),
]
