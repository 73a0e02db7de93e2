"""The access log's line for answers the app did not write itself: an unhandled error (the 500
comes from Starlette's outermost layer, after the line) and a path sent percent-encoded."""

from __future__ import annotations

import logging

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


@pytest.fixture
def client() -> TestClient:
    app = Starlette(routes=[Route("/boom", _boom), Route("/{name}", _ok)])
    app.add_middleware(AccessLog)
    return TestClient(app, raise_server_exceptions=False)


def test_an_unhandled_error_is_logged_as_the_500_it_becomes(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="queuectl.http"):
        assert client.get("/boom").status_code == 500
    [line] = [record.getMessage() for record in caplog.records if "/boom" in record.getMessage()]
    assert '"GET /boom HTTP/1.1" 500 ' in line


def test_a_path_is_logged_as_sent_so_it_cannot_fake_the_fields(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="queuectl.http"):
        assert client.get("/a%22%20200%20x?token=secret").status_code == 200
    [line] = [record.getMessage() for record in caplog.records if "/a" in record.getMessage()]
    assert '"GET /a%22%20200%20x HTTP/1.1" 200 ' in line
    assert "secret" not in line
