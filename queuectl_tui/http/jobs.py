"""Jobs over HTTP: submit (POST /jobs, and the reference queue's POST /createJob), list and
read them."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import service
from ..models import (
    MASK,
    Attempt,
    Job,
    JobSpec,
    JobSpecError,
    parse_job_spec,
    replay_difference,
)
from ..store import Store, Submitted
from .context import context
from .errors import HttpError
from .requests import (
    MAX_PAGE,
    cursor_param,
    ended_cursor_param,
    int_param,
    json_body,
    order_param,
    queue_param,
    state_param,
)

RETRY_AFTER_SECONDS = 1
MAX_SEARCH = (
    1000  # characters of GET /jobs?q=  # a full queue drains at the pools' pace; ask again soon
)


async def submit(request: Request) -> Response:
    ctx = context(request)
    who = ctx.gate.writer(request, typed_submission=True)
    body = await json_body(request, ctx.settings.http_body_limit)
    if body is None:
        raise HttpError(400, "send the job as a JSON object")
    try:
        spec = parse_job_spec(body, ctx.settings.job_types)
    except JobSpecError as error:
        if error.field == "command" and not ctx.options.allow_commands:
            # This server takes typed jobs only: say what it does take.
            known = ", ".join(sorted(ctx.settings.job_types)) or "none are configured"
            raise HttpError(
                422, f"give the job a 'type' (known: {known}) and its 'payload'", "type"
            ) from None
        raise HttpError(422, str(error), error.field) from None
    if spec.job_type is None and not ctx.options.allow_commands:
        raise HttpError(
            403,
            "this server takes typed jobs only ('type' and 'payload'); a raw 'command' needs "
            "`queuectl serve --allow-commands`",
            "command",
        )
    if spec.job_type is None:
        who = ctx.gate.writer(request)  # a raw command: never anonymous, whatever the address
    result = await ctx.submitter.submit(spec, who)
    if result.status is Submitted.CREATED:
        assert result.job is not None
        location = f"/jobs/{quote(result.job.id, safe='')}"
        return JSONResponse(job_view(result.job), 201, headers={"Location": location})
    if result.status is Submitted.EXISTING:
        assert result.job is not None
        _check_replay(result.job, spec, ctx.settings.max_retries, "id" in body)
        return JSONResponse(job_view(result.job), 200)
    if result.status is Submitted.DUPLICATE_ID:
        raise HttpError(409, result.reason, "id")
    if result.status is Submitted.NEW_QUEUE_REFUSED:
        raise HttpError(422, result.reason, "queue")
    if result.status is Submitted.UNKNOWN_PARENT:
        raise HttpError(422, result.reason, "after")
    raise HttpError(429, result.reason, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def _check_replay(job: Job, spec: JobSpec, default_max_retries: int, id_given: bool) -> None:
    """A known idempotency key answers with its job only when the body asks for that job:
    reused for another one, it is 422 (nothing stored), never the first job in silence."""
    differs = replay_difference(job, spec, default_max_retries, id_given)
    if differs is not None:
        raise HttpError(
            422,
            f"idempotency key '{job.idempotency_key}' was used for job '{job.id}' with another "
            f"'{differs}'; send that job again as it was, or use a new key",
            "idempotency_key",
        )


async def list_jobs(request: Request) -> Response:
    ctx = context(request)
    state, queue = state_param(request), queue_param(request)
    limit = int_param(request, "limit", 50, 1, MAX_PAGE)
    order = order_param(request)
    after, after_end = (
        ended_cursor_param(request) if order.by_end else (cursor_param(request), None)
    )
    with_secrets = ctx.gate.may_see_output(request)

    search = request.query_params.get("q")
    if search is not None and (not search.strip() or len(search) > MAX_SEARCH):
        raise HttpError(422, f"q must be a search of 1 to {MAX_SEARCH} characters", "q")

    def read(store: Store) -> bytes:
        # Rendered on the worker thread too: a page of 500 jobs is tens of milliseconds of
        # JSON, which on the event loop would hold up every other client (/healthz too).
        if search is None:
            page = service.list_jobs(
                store, state, limit + 1, after, order.newest_first, queue, order.by_end, after_end
            )
        else:
            try:
                found = service.search_jobs(
                    store,
                    search,
                    limit + 1,
                    after,
                    order.newest_first,
                    state,
                    queue,
                    by_end=order.by_end,
                    after_end=after_end,
                )
            except service.InputError as error:
                raise HttpError(422, str(error), "q") from None
            page = service.JobPage(found.jobs, found.matches)
        return bytes(JSONResponse(page_view(page, limit, with_secrets, order.by_end)).body)

    return Response(await ctx.stores.run(read), media_type="application/json")


async def get_job(request: Request) -> Response:
    ctx = context(request)
    job_id = request.path_params["job_id"]
    job, attempts, links = await ctx.stores.run(
        lambda store: (*service.job_history(store, job_id), service.job_links(store, job_id))
    )
    shown = ctx.gate.may_see_output(request)
    history = {"attempt_history": [attempt_view(a, shown) for a in attempts]}
    return JSONResponse(job_view(job, shown) | service.links_view(links) | history)


def page_view(
    page: service.JobPage, limit: int, with_secrets: bool, by_end: bool = False
) -> dict[str, Any]:
    """The body of GET /jobs from a page read with one job more than `limit` (the dashboard's
    page renders the same shape). In the order of the jobs' ends (`by_end`) the cursor is
    the last job's end and seq, so that it holds even once that job is gone."""
    jobs = page.jobs[:limit]
    more = len(page.jobs) > limit
    cursor = None
    if more and jobs:
        last = jobs[-1]
        cursor = f"{last.finished_at}.{last.seq}" if by_end else str(last.seq)
    return {
        "jobs": [job_view(job, with_secrets) for job in jobs],
        "next_cursor": cursor,
        "total": page.total,
    }


def job_view(job: Job, with_secrets: bool = True) -> dict[str, Any]:
    view = job.to_dict()
    if not with_secrets:
        view["payload"] = None  # it may hold secrets, as output does: a token shows it
        if view["env"]:  # the names only, as for output: a token shows the values
            view["env"] = dict.fromkeys(view["env"], MASK)
    return view


def attempt_view(attempt: Attempt, with_output: bool) -> dict[str, Any]:
    view = attempt.to_dict()
    if not with_output:
        view["output"] = None  # it may hold secrets: a token shows it
    return view


READ_ROUTES = [
    Route("/jobs", list_jobs, methods=["GET"]),
    Route("/jobs/{job_id:path}", get_job, methods=["GET"]),
]
ROUTES = [
    Route("/jobs", submit, methods=["POST"]),
    Route("/createJob", submit, methods=["POST"]),
    *READ_ROUTES,
]
