"""The API against its own OpenAPI document: generated requests (a bounded number per route)
never get a server error, and every answer is one the document declares."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from http_helpers import settings_for
from hypothesis import HealthCheck, settings
from schemathesis import checks
from starlette.testclient import TestClient

from queuectl_tui.http.app import create_app
from queuectl_tui.http.context import ServeOptions

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root: Path = tmp_path_factory.mktemp("schema")
    app = create_app(settings_for(root), ServeOptions(allow_commands=True))
    with TestClient(app):  # runs the lifespan: the group committer starts
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


schema = schemathesis.pytest.from_fixture("api_schema")


# No server error, and each answer's status, media type and body as the document declares.
# (Not "every request the schema allows is accepted": the document cannot say everything the
# validator checks, such as 'command' and 'type' not going together.)
CHECKS = [
    checks.not_a_server_error,
    checks.negative_data_rejection,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


@schema.parametrize()
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case: Any) -> None:
    response = case.call()
    assert response.status_code < 500, (case.method, case.path, response.text)
    case.validate_response(response, checks=CHECKS)
