"""Submissions over HTTP that must not be stored by surprise or in silence: an idempotency
key reused for another job, a typed job asking for more than its type allows, a 503 that
said "not taken", a body-less write of another media type; and the audit line of each
submission."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from http_helpers import client_for, settings_for

from queuectl_tui import service
from queuectl_tui.http.submitter import Submitter, SubmitterDown
from queuectl_tui.models import parse_job_spec
from queuectl_tui.store import Store, open_store

from helpers import backend_location

TYPES = {
    "email": {
        "command": "cat",
        "max_retries": 0,
        "timeout": 30,
        "priority": 1,
        "queue": "mail",
        "queues": ["mail-bulk"],
    }
}


def _stored(location: str) -> list[str]:
    with open_store(location) as store:
        return sorted(job.id for job in store.list_jobs(limit=10_000))


def test_an_idempotency_key_reused_for_another_job_is_422_naming_the_key(
    tmp_path: Path, backend: str
) -> None:
    location = backend_location(backend, tmp_path)
    first = {"type": "email", "payload": {"to": "a@example.com"}, "idempotency_key": "k-1"}
    with client_for(settings_for(tmp_path, job_types=TYPES, database=location)) as client:
        created = client.post("/jobs", json=first)
        assert created.status_code == 201, created.text
        # The same body again, with its defaults spelled out: the same job, nothing new.
        same = first | {"max_retries": 0, "queue": "mail", "priority": 1}
        again = client.post("/jobs", json=same)
        assert again.status_code == 200 and again.json()["id"] == created.json()["id"]
        for other in (
            first | {"payload": {"to": "b@example.com"}},
            first | {"queue": "mail-bulk"},
            first | {"priority": 0},
            first | {"timeout": 5},
            first | {"id": "another-id"},
        ):
            refused = client.post("/jobs", json=other)
            assert refused.status_code == 422, (other, refused.text)
            body = refused.json()
            assert body["field"] == "idempotency_key" and "'k-1'" in body["error"]
    assert _stored(location) == [created.json()["id"]]


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"timeout": 604_800}, "timeout"),
        ({"max_retries": 100}, "max_retries"),
        ({"priority": 100}, "priority"),
        ({"queue": "elsewhere"}, "queue"),
    ],
)
def test_a_typed_job_may_not_ask_for_more_than_its_type(
    tmp_path: Path, override: dict[str, object], field: str
) -> None:
    location = str(tmp_path / "q.db")
    with client_for(settings_for(tmp_path, job_types=TYPES)) as client:
        refused = client.post("/jobs", json={"type": "email", "payload": {}} | override)
        assert refused.status_code == 422 and refused.json()["field"] == field, refused.text
        assert "for jobs of type 'email'" in refused.json()["error"]
        less = {"type": "email", "timeout": 5, "priority": -3, "queue": "mail-bulk"}
        taken = client.post("/jobs", json=less)
        assert taken.status_code == 201, taken.text
    job = taken.json()
    assert (job["timeout"], job["priority"], job["queue"], job["max_retries"]) == (
        5.0,
        -3,
        "mail-bulk",
        0,
    )
    assert _stored(location) == [job["id"]]


def test_a_submission_answered_not_taken_is_never_stored_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both committers stuck in a commit, a third submission waits past its deadline and
    hears 503 "not taken"; once the commits go through, it stays unstored (the two taken
    ones wait for their commit and are answered)."""
    settings = settings_for(tmp_path, job_types=TYPES)
    release = threading.Event()
    inside = threading.Semaphore(0)
    real_submit = service.submit

    def stuck(store: Store, *args: object) -> object:
        inside.release()
        assert release.wait(60)
        return real_submit(store, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(service, "submit", stuck)

    async def scenario() -> tuple[list[str], str]:
        submitter = Submitter(settings)
        submitter.answer_within = 0.5
        submitter.start()
        try:
            loop = asyncio.get_running_loop()
            specs = [parse_job_spec({"id": name, "command": "true"}) for name in "abc"]
            taken = []
            for spec in specs[:2]:  # one for each committer, each then stuck in its commit
                taken.append(asyncio.ensure_future(submitter.submit(spec)))
                assert await loop.run_in_executor(None, inside.acquire, True, 30)
            with pytest.raises(SubmitterDown) as refused:
                await submitter.submit(specs[2])
            release.set()
            answered = await asyncio.gather(*taken)
            return [result.job.id for result in answered if result.job], str(refused.value)
        finally:
            release.set()
            await loop.run_in_executor(None, submitter.stop)

    answered, refusal = asyncio.run(scenario())
    assert answered == ["a", "b"]
    assert "did not take the submission in time" in refusal
    assert _stored(str(tmp_path / "q.db")) == ["a", "b"]


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/queues/mail/pause"), ("POST", "/jobs/x/cancel"), ("DELETE", "/jobs/x")],
)
def test_a_body_less_write_of_another_media_type_is_415_and_changes_nothing(
    tmp_path: Path, method: str, path: str
) -> None:
    with client_for(settings_for(tmp_path, job_types=TYPES)) as client:
        assert client.post("/jobs", json={"id": "x", "type": "email"}).status_code == 201
        for headers in ({"content-type": "text/plain"}, {"content-type": "multipart/form-data"}):
            refused = client.request(method, path, headers=headers, content=b"")
            assert refused.status_code == 415, refused.text
        assert client.request(method, path, content=b"ok").status_code == 415  # no media type
        assert client.get("/queues").json()["queues"][0]["paused"] is False
        assert client.get("/jobs/x").json()["state"] == "pending"
