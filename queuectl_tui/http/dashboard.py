"""The read-only web dashboard: the page at / and its script, styles and icon at /static/.

The page is rendered on the server from the same JSON shapes the API serves, so that its
first view is complete without JavaScript; the script then reads those JSON routes again
whenever GET /events tells it the queue changed, and redraws the page in place. Where reads
need a token, a browser without one gets the page with a sign-in form and no figures.
Nothing here changes the queue."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import PurePosixPath

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from .. import control, schedule_ops, service
from ..errors import NotFound
from ..models import JobState, QueueCounts
from ..store import QueueStats, Store
from ..timeutil import now_ms
from .auth import CHALLENGE, cookie_name
from .context import context
from .errors import HttpError
from .jobs import attempt_view, job_view, page_view
from .markup import View
from .page import DEAD_PAGE, JOBS_PAGE, LINKS_SHOWN, Snapshot, render
from .reads import workers_view
from .requests import cursor_param, state_param
from .schedules import schedule_view

STATIC = resources.files(__package__) / "static"
_CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
# A plain file name: no separator, no leading dot (so neither '..' nor hidden files).
_STATIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9]+)+")
MAX_BACK = 100  # earlier pages remembered in the URL for "previous"


def _static_files() -> dict[str, bytes]:
    """Every servable file of the static folder, read once: a name not listed is a 404,
    whatever the request's path holds."""
    found: dict[str, bytes] = {}
    for entry in STATIC.iterdir():
        name = entry.name
        if entry.is_file() and _STATIC_NAME.fullmatch(name) and _content_type(name):
            found[name] = entry.read_bytes()
    return found


def _content_type(name: str) -> str | None:
    return _CONTENT_TYPES.get(PurePosixPath(name).suffix.lower())


_FILES = _static_files()


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    body = _FILES.get(name)
    kind = _content_type(name)
    if body is None or kind is None:
        raise HttpError(404, f"no such file: /static/{name}")
    return Response(body, media_type=kind)


def _view(request: Request) -> View:
    params = request.query_params
    back_text = params.get("back", "")
    back = tuple(back_text.split(",")) if back_text else ()
    if len(back) > MAX_BACK or not all(p.isascii() and p.isdigit() and len(p) <= 18 for p in back):
        raise HttpError(422, "back must be the cursors of earlier pages", "back")
    job = params.get("job") or None
    return View(state_param(request), cursor_param(request), tuple(int(p) for p in back), job)


def _read(store: Store, view: View, stale_after_s: float, with_output: bool) -> Snapshot:
    """Everything the page shows, in the shapes of GET /stats, /jobs, /workers, /jobs/{id}."""
    stats = service.queue_stats(store).to_dict()
    # Newest first, as GET /jobs?order=newest: a job just enqueued is on top; the dead ones
    # as ?order=ended, the latest to die on top.
    by_death = view.state is JobState.DEAD
    jobs = service.list_jobs(
        store, view.state, JOBS_PAGE + 1, view.cursor, newest_first=True, by_end=by_death
    )
    dead = service.list_jobs(store, JobState.DEAD, DEAD_PAGE + 1, newest_first=True, by_end=True)
    workers = service.shown_workers(store, stale_after_s, history=False)
    queues = control.queue_overview(store)
    schedules = schedule_ops.list_schedules(store)
    now = store.now()
    job = None
    if view.job is not None:
        try:
            found, attempts = service.job_history(store, view.job)
        except NotFound:
            pass
        else:
            history = [attempt_view(attempt, with_output) for attempt in attempts]
            links = service.links_view(service.job_links(store, view.job, LINKS_SHOWN))
            job = job_view(found, with_output) | links | {"attempt_history": history}
    return Snapshot(
        stats,
        page_view(jobs, JOBS_PAGE, with_output),
        page_view(dead, DEAD_PAGE, with_output),
        workers_view(workers, stale_after_s, now),
        job,
        now,
        {"queues": [queue.to_dict(now) for queue in queues]},
        {"schedules": [schedule_view(one, with_output) for one in schedules]},
    )


def _nothing(stale_after_s: float) -> Snapshot:
    """The page's figures for a browser that has not signed in: none at all."""
    now = now_ms()
    empty = page_view(service.JobPage([], 0), 0, False)
    stats = QueueStats(QueueCounts()).to_dict()
    workers = workers_view([], stale_after_s, now)
    return Snapshot(stats, empty, empty, workers, None, now, {"queues": []}, {"schedules": []})


async def page(request: Request) -> Response:
    ctx = context(request)
    view = _view(request)
    stale = ctx.settings.stale_worker_timeout
    if ctx.gate.reads_need_token and ctx.gate.token(request) is None:
        # The sign-in form, and not one figure: the script signs in within the tab and draws
        # the queue from the API with the token in a header.
        page = render(view, _nothing(stale), sign_in=True)
        answer = HTMLResponse(page, status_code=401, headers=CHALLENGE)
        if cookie_name(request.scope) in request.cookies:  # one the server no longer knows
            answer.delete_cookie(cookie_name(request.scope), path="/")
        return answer
    with_output = ctx.gate.may_see_output(request)
    snapshot = await ctx.stores.run(lambda store: _read(store, view, stale, with_output))
    return HTMLResponse(render(view, snapshot))


ROUTES = [
    Route("/", page, methods=["GET"]),
    Route("/static/{name}", static, methods=["GET"]),
]
