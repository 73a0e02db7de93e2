"""The access log's line for answers the app did not write itself: an unhandled error (the 500
comes from Starlette's outermost layer, after the line) and a path sent percent-encoded."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from queuectl_tui.http.access_log import AccessLog


def _boom(request: Request) -> PlainTextResponse:
    raise RuntimeError("boom")


def _ok(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def logged() -> Iterator[list[str]]:
    """The server log's lines, read from its own logger: a server started earlier in the same
    process stops that logger passing records to the root, where caplog listens."""
    logger = logging.getLogger("queuectl.http")
    handler, level = _Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.fixture
def client() -> TestClient:
    app = Starlette(routes=[Route("/boom", _boom), Route("/{name}", _ok)])
    app.add_middleware(AccessLog)
    return TestClient(app, raise_server_exceptions=False)


def test_an_unhandled_error_is_logged_as_the_500_it_becomes(
    client: TestClient, logged: list[str]
) -> None:
    assert client.get("/boom").status_code == 500
    [line] = [line for line in logged if "/boom" in line]
    assert '"GET /boom HTTP/1.1" 500 ' in line


def test_a_path_is_logged_as_sent_so_it_cannot_fake_the_fields(
    client: TestClient, logged: list[str]
) -> None:
    assert client.get("/a%22%20200%20x?token=secret").status_code == 200
    [line] = [line for line in logged if "/a" in line]
    assert '"GET /a%22%20200%20x HTTP/1.1" 200 ' in line
    assert "secret" not in line
