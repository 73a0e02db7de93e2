"""Reading a request: its JSON body (within the size limit) and its query parameters, each
refused with the status and sentence a client can act on."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from ..errors import InvalidInput
from ..models import STATES, JobState, queue_name
from .errors import HttpError

MAX_PAGE = 500  # jobs per page of GET /jobs


async def json_body(request: Request, limit: int) -> Any:
    """The decoded JSON body: 413 past `limit` bytes, 415 for another media type (declared
    even on an empty body, or a body without one), 400 when it is not JSON. An empty body
    without a media type is None.

    Every write reads its body here, those that take none too: a page elsewhere can post
    other media types without asking first, so no write takes them, with or without a body."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HttpError(413, f"the body is larger than {limit:,} bytes")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and not _is_json(kind):
        raise HttpError(415, f"send JSON (Content-Type: application/json), not {kind}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HttpError(413, f"the body is larger than {limit:,} bytes")
    if not body.strip():
        return None
    if not kind:
        raise HttpError(415, "send JSON (Content-Type: application/json), not none")
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise HttpError(400, "the body is not UTF-8") from None
    except RecursionError:
        raise HttpError(400, "invalid JSON: values nested too deeply") from None
    except ValueError as error:  # JSONDecodeError, or an integer too long to convert
        raise HttpError(400, f"invalid JSON: {error}") from None


async def no_body(request: Request, limit: int) -> None:
    """The body of a write that takes none: nothing, or an empty JSON object (the media type
    rule of json_body holds for it too)."""
    if await json_body(request, limit) not in (None, {}):
        raise HttpError(422, "this request takes no body (or {})")


def _is_json(kind: str) -> bool:
    return kind == "application/json" or kind.endswith("+json")


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def state_param(request: Request) -> JobState | None:
    value = request.query_params.get("state")
    if value is None:
        return None
    try:
        return JobState(value.lower())
    except ValueError:
        names = ", ".join(state.value for state in STATES)
        raise HttpError(422, f"unknown state {value!r}; one of: {names}", "state") from None


def queue_param(request: Request) -> str | None:
    value = request.query_params.get("queue")
    if value is None:
        return None
    return checked_queue(value, "queue")


def checked_queue(value: str, field: str) -> str:
    try:
        return queue_name(value, field)
    except InvalidInput as error:
        raise HttpError(422, str(error), field) from None


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    value = request.query_params.get(name)
    if value is None:
        return default
    if (
        not (value.isascii() and value.isdigit())
        or len(value) > 12
        or not low <= int(value) <= high
    ):
        raise HttpError(422, f"{name} must be a whole number from {low} to {high}", name)
    return int(value)


def cursor_param(request: Request) -> int | None:
    """The keyset cursor of GET /jobs: the `next_cursor` of the page before."""
    value = request.query_params.get("cursor")
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise HttpError(422, "cursor must be a next_cursor from an earlier page", "cursor")
    return int(value)


def ended_cursor_param(request: Request) -> tuple[int | None, int | None]:
    """The cursor of GET /jobs?order=ended: the `next_cursor` of the page before, END.SEQ
    (a bare SEQ is taken too: the page then goes on from where that job ended)."""
    value = request.query_params.get("cursor")
    if value is None:
        return None, None
    end, dot, seq = value.partition(".")
    parts = (end, seq) if dot else (seq or end,)
    if not all(p.isascii() and p.lstrip("-").isdigit() and len(p) <= 20 for p in parts):
        raise HttpError(422, "cursor must be a next_cursor from an earlier page", "cursor")
    return (int(seq), int(end)) if dot else (int(end), None)


@dataclass(frozen=True, slots=True)
class Order:
    newest_first: bool
    by_end: bool


def order_param(request: Request) -> Order:
    """`order` of GET /jobs: "oldest" (creation order, the default), "newest" first, or
    "ended": the jobs that have ended, the latest to end first (dead letters by time of
    death). A cursor pages on in the same order."""
    value = request.query_params.get("order", "oldest")
    if value not in ("oldest", "newest", "ended"):
        raise HttpError(422, "order must be 'oldest', 'newest' or 'ended'", "order")
    return Order(newest_first=value != "oldest", by_end=value == "ended")
