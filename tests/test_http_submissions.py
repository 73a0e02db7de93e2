"""Submissions over HTTP that must not be stored by surprise or in silence: an idempotency
key reused for another job, a typed job asking for more than its type allows, a 503 that
said "not taken", a body-less write of another media type; and the audit line of each
submission."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from http_helpers import GENERATED, bearer, client_for, settings_for
from test_http_server import Server

from queuectl_tui import service
from queuectl_tui.http.submitter import Submitter, SubmitterDown
from queuectl_tui.models import Operator, parse_job_spec
from queuectl_tui.store import Store, open_store

from helpers import backend_location

# A write token of a server's config (long enough, and not one character over and over).
TOKEN = "submissions-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

WHO = Operator("http", "anonymous", "127.0.0.1")
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
                taken.append(asyncio.ensure_future(submitter.submit(spec, WHO)))
                assert await loop.run_in_executor(None, inside.acquire, True, 30)
            with pytest.raises(SubmitterDown) as refused:
                await submitter.submit(specs[2], WHO)
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
        token = bearer(GENERATED)  # operator's actions need the server's token
        for kind in ("text/plain", "multipart/form-data"):
            headers = token | {"content-type": kind}
            refused = client.request(method, path, headers=headers, content=b"")
            assert refused.status_code == 415, refused.text
        no_type = client.request(method, path, headers=token, content=b"ok")
        assert no_type.status_code == 415
        assert client.get("/queues").json()["queues"][0]["paused"] is False
        assert client.get("/jobs/x").json()["state"] == "pending"


def test_each_submission_is_audited_as_its_submitter_s(tmp_path: Path, backend: str) -> None:
    location = backend_location(backend, tmp_path)
    with client_for(settings_for(tmp_path, job_types=TYPES, database=location)) as client:
        created = [
            client.post("/jobs", json={"type": "email", "idempotency_key": f"k{n}"}).json()["id"]
            for n in range(3)
        ]
        assert (
            client.post("/jobs", json={"type": "email", "idempotency_key": "k0"}).status_code == 200
        )
        assert client.post("/jobs", json={"type": "email", "queue": "x"}).status_code == 422
    with open_store(location) as store:
        entries = [entry for entry in store.actions(100) if entry.action == "submit"]
    assert sorted(entry.subject.split()[0] for entry in entries) == sorted(created)
    for entry in entries:  # a replay and a refusal add nothing; no payload or command shown
        assert (entry.face, entry.touched) == ("http", 1)
        assert entry.subject.endswith("(type email) to queue mail")


def _series(metrics: str, name: str) -> set[str]:
    return {
        line.split("{")[1].split(",")[0]
        for line in metrics.splitlines()
        if line.startswith(name + "{")
    }


def test_metrics_show_only_queues_that_exist(tmp_path: Path, backend: str) -> None:
    """A queue's series are there while it holds a job or is configured, and go with it."""
    location = backend_location(backend, tmp_path)
    with open_store(location) as store:
        for n in range(30):
            spec = parse_job_spec({"id": f"j{n}", "command": "true", "queue": f"q{n}"})
            store.enqueue(spec, 0, store.now())
        store.set_queue_paused("held", True, store.now(), WHO.action("pause", "held"))
    with client_for(settings_for(tmp_path, database=location)) as client:
        before = client.get("/metrics").text
        assert _series(before, "queuectl_jobs") == {f'queue="q{n}"' for n in range(30)} | {
            'queue="held"'
        }
        with open_store(location) as store:
            store.delete([f"j{n}" for n in range(1, 30)], store.now(), None)
        after = client.get("/metrics").text
    assert _series(after, "queuectl_jobs") == {'queue="q0"', 'queue="held"'}


@pytest.mark.slow
def test_clients_create_only_so_many_queues_and_metrics_stay_bounded(tmp_path: Path) -> None:
    """3,000 made-up queue names against a real server with http-max-queues 20: 20 queues
    at most, the rest 422 naming the queue; /metrics stays small and forgets them with their
    jobs."""
    import httpx

    config = {"http_max_queues": 20, "http_tokens": {"ci": {"token": TOKEN, "access": "write"}}}
    server = Server(tmp_path, config, "--allow-commands")
    try:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client:
            answers = [
                client.post("/jobs", json={"command": "true", "queue": f"made-up-{n}"})
                for n in range(3000)
            ]
            created = [answer.json()["id"] for answer in answers if answer.status_code == 201]
            refused = [answer for answer in answers if answer.status_code == 422]
            assert len(created) == 20 and len(refused) == 2980
            assert refused[0].json()["field"] == "queue"
            assert "http-max-queues" in refused[0].json()["error"]
            full = client.get("/metrics").text
            assert len(_series(full, "queuectl_jobs")) == 20
            for job_id in created:
                assert client.delete(f"/jobs/{job_id}").status_code == 200
            empty = client.get("/metrics").text
            assert _series(empty, "queuectl_jobs") == set()
            assert len(empty) < len(full)
    finally:
        server.stop()


class ServerOn(Server):
    """A real server on the queue at `location` (a SQLite path or a PostgreSQL URL)."""

    def __init__(self, location: str, *args: object) -> None:
        self.location = location
        super().__init__(*args)  # type: ignore[arg-type]

    def command(self) -> list[str]:
        return [*super().command()[:-1], self.location]


@pytest.mark.slow
def test_the_submission_attacks_against_a_real_server(tmp_path: Path, backend: str) -> None:
    """Over real sockets, on each backend: a typed job asking for a week-long timeout, a
    hundred retries, a higher priority or another queue; an idempotency key reused for
    another body; a NUL in an id; a body-less write of another media type. Each is refused
    and stores nothing; the one job made is audited."""
    import httpx

    location = backend_location(backend, tmp_path)
    config = {
        "job_types": TYPES,
        "http_tokens": {"ci": {"token": TOKEN, "access": "write"}},
    }
    server = ServerOn(location, tmp_path, config)
    try:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client:
            seed = {"type": "email", "payload": {"to": "a@example.com"}, "idempotency_key": "s"}
            made = client.post("/createJob", json=seed)
            assert made.status_code == 201, made.text
            job_id = made.json()["id"]
            for override in ({"timeout": 604_800}, {"max_retries": 100}, {"priority": 9}):
                refused = client.post("/jobs", json={"type": "email"} | override)
                assert refused.status_code == 422, refused.text
            assert client.post("/jobs", json={"type": "email", "queue": "x"}).status_code == 422
            other = client.post("/jobs", json=seed | {"payload": {"to": "b@example.com"}})
            assert other.status_code == 422 and other.json()["field"] == "idempotency_key"
            assert client.post("/jobs", json=seed).status_code == 200
            for method, path in (("GET", "/jobs/a%00b"), ("POST", "/jobs/a%00b/cancel")):
                assert client.request(method, path).status_code == 404
            plain = {"content-type": "text/plain"}
            assert client.post(f"/jobs/{job_id}/cancel", headers=plain).status_code == 415
            assert client.get(f"/jobs/{job_id}").json()["state"] == "pending"
    finally:
        server.stop()
    assert _stored(location) == [job_id]
    with open_store(location) as store:
        submitted = [entry for entry in store.actions(100) if entry.action == "submit"]
    assert [(entry.face, entry.actor, entry.subject.split()[0]) for entry in submitted] == [
        ("http", "ci", job_id)
    ]


def test_a_submission_may_ask_to_run_after_a_delay(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path), allow_commands=True) as client:
        job = {"id": "later", "command": "true", "delay": "15m"}
        assert client.post("/jobs", json=job, headers=bearer(GENERATED)).status_code == 201
        both = {"command": "true", "delay": 5, "run_at": "2027-01-01T00:00:00Z"}
        refused = client.post("/jobs", json=both, headers=bearer(GENERATED))
        assert refused.status_code == 422 and refused.json()["field"] == "delay"
    with open_store(str(tmp_path / "q.db")) as store:
        stored = store.get("later")
        assert stored is not None and stored.run_at - stored.created_at == 15 * 60_000
        assert [job.id for job in store.list_jobs()] == ["later"]
