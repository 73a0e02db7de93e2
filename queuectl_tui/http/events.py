"""`GET /events`: server-sent events that tell a page the queue changed, so that it reads the
API again then, and not on a timer (news.py hears of the changes). Events:
`change` (data: a version that grows with each change), sent once as a stream opens (a page
that reconnects reads what it missed) and then after each change. A stream also ends after
STREAM_FOR seconds (the client reconnects) or when the server stops.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .context import context
from .followers import FollowerStream

STREAM_FOR = 300.0  # seconds a stream lasts before the client reconnects
KEEP_ALIVE = 15.0  # seconds of silence after which a comment keeps proxies from closing it
STOP_CHECK = 1.0  # seconds between looks at whether the server is stopping


async def events(request: Request) -> Response:
    ctx = context(request)
    ctx.event_streams.enter()
    return FollowerStream(ctx.event_streams, _changes(request))


async def _changes(request: Request) -> AsyncIterator[str]:
    ctx = context(request)
    loop = asyncio.get_running_loop()
    until = loop.time() + STREAM_FOR
    quiet_since = loop.time()
    version = ctx.news.version
    yield "retry: 1000\n\n"
    yield _change(version)
    while not ctx.stopping.is_set() and loop.time() < until:
        newer = await ctx.news.wait(version, STOP_CHECK)
        if newer != version:
            version = newer
            yield _change(version)
            quiet_since = loop.time()
        elif loop.time() - quiet_since >= KEEP_ALIVE:
            yield ": still here\n\n"
            quiet_since = loop.time()
        # A client that goes away ends the stream: the response cancels this generator.


def _change(version: int) -> str:
    return f"event: change\ndata: {json.dumps({'version': version})}\n\n"


ROUTES = [Route("/events", events, methods=["GET"])]
