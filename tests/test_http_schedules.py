"""Schedules over HTTP: reading them, adding one, pausing, resuming, running and removing it,
each change only with the write token (and a raw command only with --allow-commands)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from http_helpers import GENERATED, READ, WRITE, bearer, client_for, settings_for

from queuectl_tui.store import open_store

NIGHTLY = {"name": "nightly", "cron": "0 2 * * *", "timezone": "Europe/Berlin"}


def test_add_read_pause_resume_run_and_remove(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    with client_for(settings, allow_commands=True) as client:
        auth = bearer(GENERATED)
        body = NIGHTLY | {"command": "echo nightly", "env": {"API_TOKEN": "s3cret"}}
        added = client.post("/schedules", json=body, headers=auth)
        assert added.status_code == 201, added.text
        assert added.headers["location"] == "/schedules/nightly"
        data = added.json()
        assert (data["schedule"], data["description"], data["origin"]) == (
            "0 2 * * *",
            "At 02:00 AM",
            "http",
        )
        assert data["job"]["env"] == {"API_TOKEN": "********"}
        listed = client.get("/schedules").json()["schedules"]
        assert [s["name"] for s in listed] == ["nightly"]
        # Anonymous reads without configured tokens: the environment's names only.
        assert listed[0]["job"]["env"] == {"API_TOKEN": "********"}
        paused = client.post("/schedules/nightly/pause", headers=auth)
        assert paused.status_code == 200 and paused.json()["paused"] is True
        assert paused.json()["next_at"] is None
        resumed = client.post("/schedules/nightly/resume", headers=auth)
        assert resumed.json()["paused"] is False and resumed.json()["next_at"]
        run = client.post("/schedules/nightly/run", headers=auth)
        assert run.status_code == 201 and run.json()["id"].startswith("nightly@run-")
        shown = client.get("/schedules/nightly").json()
        assert shown["last_job"]["id"] == run.json()["id"]
        assert shown["last_job"]["state"] == "pending"
        gone = client.delete("/schedules/nightly", headers=auth)
        assert gone.json() == {"name": "nightly", "result": "removed"}
        assert client.get("/schedules/nightly").status_code == 404
    with open_store(settings.database) as store:
        actions = [entry.action for entry in store.actions()]
        assert actions[:5] == [
            "schedule-remove",
            "schedule-run",
            "schedule-resume",
            "schedule-pause",
            "schedule-add",
        ]
        assert {entry.face for entry in store.actions()[:5]} == {"http"}


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/schedules", NIGHTLY | {"type": "email", "payload": {}}),
        ("POST", "/schedules/nightly/pause", None),
        ("POST", "/schedules/nightly/resume", None),
        ("POST", "/schedules/nightly/run", None),
        ("DELETE", "/schedules/nightly", None),
    ],
)
def test_changes_need_the_write_token(
    tmp_path: Path, method: str, path: str, body: dict[str, object] | None
) -> None:
    settings = replace(settings_for(tmp_path), tokens=(WRITE, READ))
    with client_for(settings) as client:
        added = client.post("/schedules", json=NIGHTLY | {"type": "email"}, headers=bearer(WRITE))
        assert added.status_code == 201, added.text
        anonymous = client.request(method, path, json=body)
        assert anonymous.status_code == 401
        reader = client.request(method, path, json=body, headers=bearer(READ))
        assert reader.status_code == 403
        assert client.get("/schedules", headers=bearer(READ)).status_code == 200
        assert client.get("/schedules").status_code == 401  # reads need a token here
    with open_store(settings.database) as store:
        schedule = store.get_schedule("nightly")
        assert schedule is not None and not schedule.paused
        assert sum(store.counts().values()) == 0  # no job was made


def test_even_a_typed_schedule_needs_a_token_without_configured_tokens(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path)) as client:
        refused = client.post("/schedules", json=NIGHTLY | {"type": "email"})
        assert refused.status_code == 401
        assert client.get("/schedules").json() == {"schedules": []}


def test_a_raw_command_needs_allow_commands(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path)) as client:
        body = NIGHTLY | {"command": "rm -rf /"}
        refused = client.post("/schedules", json=body, headers=bearer(GENERATED))
        assert refused.status_code == 403 and refused.json()["field"] == "command"
        assert client.get("/schedules").json() == {"schedules": []}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "cron": "61 * * * *", "type": "email"}, "cron"),
        ({"name": "x", "every": "0s", "type": "email"}, "every"),
        ({"name": "x", "every": "5m", "timezone": "Nowhere/Land", "type": "email"}, "timezone"),
        ({"name": "two words", "every": "5m", "type": "email"}, "name"),
        ({"every": "5m", "type": "email"}, "name"),
        ({"name": "x", "every": "5m", "type": "email", "colour": "red"}, "colour"),
    ],
)
def test_bad_input_is_422_naming_the_field(
    tmp_path: Path, body: dict[str, object], field: str
) -> None:
    with client_for(settings_for(tmp_path)) as client:
        refused = client.post("/schedules", json=body, headers=bearer(GENERATED))
        assert refused.status_code == 422 and refused.json()["field"] == field
        assert client.get("/schedules").json() == {"schedules": []}


def test_a_taken_name_is_409(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path)) as client:
        body = NIGHTLY | {"type": "email"}
        assert client.post("/schedules", json=body, headers=bearer(GENERATED)).status_code == 201
        again = client.post("/schedules", json=body, headers=bearer(GENERATED))
        assert again.status_code == 409


def test_a_read_only_server_reads_schedules_and_changes_none(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    with client_for(settings, allow_commands=True) as client:
        body = NIGHTLY | {"type": "email"}
        assert client.post("/schedules", json=body, headers=bearer(GENERATED)).status_code == 201
    with client_for(settings, read_only=True) as client:
        assert [s["name"] for s in client.get("/schedules").json()["schedules"]] == ["nightly"]
        assert client.post("/schedules/nightly/pause").status_code == 405


def test_the_openapi_document_has_the_schedule_routes(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path)) as client:
        paths = client.get("/openapi.json").json()["paths"]
    assert set(paths["/schedules"]) == {"get", "post"}
    assert set(paths["/schedules/{name}"]) == {"get", "delete"}
    for verb in ("pause", "resume", "run"):
        responses = paths[f"/schedules/{{name}}/{verb}"]["post"]["responses"]
        assert {"401", "403"} <= set(responses)
