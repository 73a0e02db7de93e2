"""A job's output over HTTP: `GET /output/{id}` reads the next step of it from a cursor (JSON),
and with `?follow=1` streams it as server-sent events until the job is finished.

Events: `output` (data: the run, whether it just started, bytes skipped and the pieces) and
`end` (data: the job's final state), each with an `id:` that is the cursor after it, so a
browser's EventSource resumes where it was (Last-Event-ID) when the connection drops. A
stream also ends after STREAM_FOR seconds (the browser reconnects, a proxy's timeout never
cuts it) or when the server stops.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..job_output import STEP_PIECES, OutputCursor, OutputStep, read_output
from .context import context
from .errors import HttpError
from .followers import FollowerStream

FOLLOW_POLL = 0.25  # seconds between looks for more: the pool writes every 0.3 s
STREAM_FOR = 300.0  # seconds a stream lasts before the client reconnects
KEEP_ALIVE = 15.0  # seconds of silence after which a comment line keeps proxies from closing


def cursor_text(cursor: OutputCursor) -> str:
    return f"{cursor.run}.{cursor.seq}.{cursor.next_byte}.{int(cursor.ended)}"


def parse_cursor(text: str | None) -> OutputCursor:
    if not text:
        return OutputCursor()
    parts = text.split(".")
    try:
        run, seq, next_byte, ended = (int(part) for part in parts)
        if len(text) > 64 or run < 0 or seq < -1 or next_byte < 0 or ended not in (0, 1):
            raise ValueError
    except ValueError:
        raise HttpError(422, "cursor must be one an earlier answer gave", "cursor") from None
    return OutputCursor(run, seq, next_byte, bool(ended))


def step_view(step: OutputStep) -> dict[str, Any]:
    return {
        "run": step.run,
        "started": step.started,
        "skipped": step.skipped,
        "chunks": [chunk.to_dict() for chunk in step.chunks],
    }


async def job_output(request: Request) -> Response:
    ctx = context(request)
    if not ctx.gate.may_see_output(request):
        raise HttpError(401, "output may hold secrets: send a token that may read it")
    job_id = request.path_params["job_id"]
    resume = request.headers.get("last-event-id") or request.query_params.get("cursor")
    cursor = parse_cursor(resume)
    first = await ctx.stores.run(lambda store: read_output(store, job_id, cursor))
    if request.query_params.get("follow") not in ("1", "true"):
        return JSONResponse(
            {
                "job": first.job.id,
                "state": first.job.state.value,
                **step_view(first),
                "ended": first.ended,
                "finished": first.finished,
                "cursor": cursor_text(cursor),
            }
        )
    ctx.followers.enter()
    return FollowerStream(ctx.followers, _events(request, job_id, cursor, first))


async def _events(
    request: Request, job_id: str, cursor: OutputCursor, step: OutputStep
) -> AsyncIterator[str]:
    ctx = context(request)
    loop = asyncio.get_running_loop()
    until = loop.time() + STREAM_FOR
    quiet_since = loop.time()
    yield "retry: 1000\n\n"
    while True:
        if step.chunks or step.started or step.skipped:
            yield _event("output", step_view(step), cursor)
            quiet_since = loop.time()
        if step.finished:
            yield _event("end", {"state": step.job.state.value}, cursor)
            return
        if ctx.stopping.is_set() or loop.time() >= until:
            return
        if loop.time() - quiet_since >= KEEP_ALIVE:
            yield ": still here\n\n"
            quiet_since = loop.time()
        if len(step.chunks) < STEP_PIECES:
            await asyncio.sleep(FOLLOW_POLL)
        # A client that goes away ends the stream: the response cancels this generator.
        step = await ctx.stores.run(lambda store: read_output(store, job_id, cursor))


def _event(name: str, data: dict[str, Any], cursor: OutputCursor) -> str:
    body = json.dumps(data, ensure_ascii=True)  # one line: no newline may end the data field
    return f"id: {cursor_text(cursor)}\nevent: {name}\ndata: {body}\n\n"


ROUTES = [Route("/output/{job_id:path}", job_output, methods=["GET"])]
