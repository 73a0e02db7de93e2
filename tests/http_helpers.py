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
from queuectl_tui.http_token import generated_token

EMAIL = {"email": {"command": "cat", "max_retries": 3}}
WRITE = ApiToken("ci-bot", "ci-bot-write-7f3a9c2e41d86b05aa91", write=True)
READ = ApiToken("grafana", "grafana-read-0c5e8d7b19a4f263ee07", write=False)
# What a server without configured tokens generates for itself.
GENERATED = generated_token("generated-9d41c07e6b2f58a3d0b7e1c4", Path("q.db.http-token"))


def settings_for(tmp_path: Path, **changes: Any) -> Settings:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"job_types": changes.pop("job_types", EMAIL)}))
    settings = load_settings(str(config), db_path=str(tmp_path / "q.db"), env={})
    return replace(settings, **changes)


@contextmanager
def client_for(settings: Settings, **options: Any) -> Iterator[TestClient]:
    """A client of the app `queuectl serve` runs: without tokens configured, it has a
    generated one (GENERATED)."""
    if not settings.tokens and not options.get("read_only"):
        options.setdefault("generated", GENERATED)
    with TestClient(create_app(settings, ServeOptions(**options))) as client:
        yield client


def bearer(token: ApiToken) -> dict[str, str]:
    return {"Authorization": f"Bearer {token.secret}"}


def served(client: TestClient) -> Any:
    """What the app under `client` keeps for its routes (its state's `queuectl`)."""
    return client.app.state.queuectl  # type: ignore[attr-defined]  # an ASGI callable to its type
