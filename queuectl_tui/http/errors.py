"""Every refusal as one JSON shape, {"error": sentence, "field": name or null}, with its status."""

from __future__ import annotations

import json

from starlette.responses import Response

from ..display import printable


class HttpError(Exception):
    """A request refused with `status`; the handler turns it into a JSON response."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = headers or {}

    def response(self, headers: dict[str, str] | None = None) -> Response:
        # The message and the field may quote input (a key, a type name): shown printable and
        # encoded as ASCII JSON, so that not even a lone surrogate can break the answer.
        field = None if self.field is None else printable(self.field, single_line=True)
        body = {"error": printable(self.message, single_line=True), "field": field}
        return Response(
            json.dumps(body, ensure_ascii=True),
            status_code=self.status,
            headers=self.headers | (headers or {}),
            media_type="application/json",
        )
