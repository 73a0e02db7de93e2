"""Building the HTTP face for a test: settings on a temporary queue, and a client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from queuectl_tui.config import ApiToken, Settings, load_settings
from queuectl_tui.http.app import create_app
from queuectl_tui.http.context import ServeOptions

EMAIL = {"email": {"command": "cat", "max_retries": 3}}
WRITE = ApiToken("ci-bot", "w" * 24, write=True)
READ = ApiToken("grafana", "r" * 24, write=False)


def settings_for(tmp_path: Path, **changes: Any) -> Settings:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"job_types": changes.pop("job_types", EMAIL)}))
    settings = load_settings(str(config), db_path=str(tmp_path / "q.db"), env={})
    return replace(settings, **changes)


@contextmanager
def client_for(settings: Settings, **options: Any) -> Iterator[TestClient]:
    with TestClient(create_app(settings, ServeOptions(**options))) as client:
        yield client


def bearer(token: ApiToken) -> dict[str, str]:
    return {"Authorization": f"Bearer {token.secret}"}
