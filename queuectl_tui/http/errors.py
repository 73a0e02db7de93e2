"""Every refusal as one JSON shape, {"error": sentence, "field": name or null}, with its status."""

from __future__ import annotations

from starlette.responses import JSONResponse


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

    def response(self) -> JSONResponse:
        body = {"error": self.message, "field": self.field}
        return JSONResponse(body, status_code=self.status, headers=self.headers)
