"""The HTTP API with Starlette's test client: submit (201, 200 on replay, 400, 403, 409,
413, 415, 422, 429), reads, keyset paging, job control, tokens and the audit trail."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from http_helpers import GENERATED, READ, WRITE, bearer, client_for, settings_for
from store_helpers import NOW, claim, settle

from queuectl_tui.models import Outcome, StopKind
from queuectl_tui.store import open_store
from queuectl_tui.timeutil import now_ms

from helpers import SEED_METRIC_KEYS, RunCli, spec

SEED = {
    "type": "email",
    "payload": {"email": "user@example.com"},
    "max_retries": 3,
    "idempotency_key": "welcome-New-user-123",
}


def _stored_ids(tmp_path: Path) -> list[str]:
    with open_store(str(tmp_path / "q.db")) as store:
        return [job.id for job in store.list_jobs(limit=10_000)]


def test_the_reference_queue_s_submission_is_201_then_200(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path)) as client:
        first = client.post("/createJob", json=SEED)
        assert first.status_code == 201
        job = first.json()
        assert first.headers["location"] == f"/jobs/{job['id']}"
        assert (job["type"], job["payload"], job["state"]) == ("email", SEED["payload"], "pending")
        again = client.post("/createJob", json=SEED)
        assert again.status_code == 200 and again.json()["id"] == job["id"]
        assert client.post("/jobs", json=SEED).status_code == 200  # the same route semantics
    assert _stored_ids(tmp_path) == [job["id"]]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"type": "email", "priority": "high"}, 422, "priority"),
        ({"type": "sms"}, 422, "type"),
        ({"type": "email", "payload": {}, "colour": 1}, 422, "colour"),
        ({"command": "rm -rf /"}, 403, "command"),
        ([1, 2], 422, None),
    ],
)
def test_bad_submissions_are_refused_naming_the_field_and_store_nothing(
    tmp_path: Path, body: object, status: int, field: str | None
) -> None:
    with client_for(settings_for(tmp_path)) as client:
        answer = client.post("/jobs", json=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["field"] == field and answer.json()["error"]
    assert _stored_ids(tmp_path) == []


def test_malformed_json_wrong_type_and_big_bodies(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, http_body_limit=2048)
    with client_for(settings) as client:
        headers = {"Content-Type": "application/json"}
        assert client.post("/jobs", content=b"{bad", headers=headers).status_code == 400
        assert client.post("/jobs", content=b"\xff\xfe", headers=headers).status_code == 400
        assert client.post("/jobs", content=b"", headers=headers).status_code == 400
        form = client.post("/jobs", content=b"{}", headers={"Content-Type": "text/plain"})
        assert form.status_code == 415  # a cross-site form can't post JSON without preflight
        big = {"type": "email", "payload": "x" * 4000}
        assert client.post("/jobs", json=big).status_code == 413
    assert _stored_ids(tmp_path) == []


def test_a_duplicate_id_is_409_and_raw_commands_need_the_flag(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path), allow_commands=True) as client:
        raw = {"id": "a", "command": "true"}
        assert client.post("/jobs", json=raw, headers=bearer(GENERATED)).status_code == 201
        clash = client.post("/jobs", json={"id": "a", "type": "email"})
        assert clash.status_code == 409 and clash.json()["field"] == "id"
    assert _stored_ids(tmp_path) == ["a"]


def test_a_full_queue_answers_429_with_retry_after_and_stores_nothing(tmp_path: Path) -> None:
    types = {"email": {"command": "cat"}, "sms": {"command": "cat", "max_queue_depth": 1}}
    with client_for(settings_for(tmp_path, max_queue_depth=3, job_types=types)) as client:
        assert client.post("/jobs", json={"type": "sms"}).status_code == 201
        limited = client.post("/jobs", json={"type": "sms"})
        assert limited.status_code == 429 and "type 'sms'" in limited.json()["error"]
        assert [client.post("/jobs", json={"type": "email"}).status_code for _ in range(3)] == [
            201,
            201,
            429,
        ]
        full = client.post("/jobs", json={"type": "email", "idempotency_key": "k"})
        assert full.status_code == 429 and full.headers["retry-after"] == "1"
    assert len(_stored_ids(tmp_path)) == 3
    with client_for(settings_for(tmp_path)) as client:
        text = client.get("/metrics").text
        assert "queuectl_admission_rejected_total 3.0" in text
        keys = client.get("/metrics", headers={"Accept": "application/json"}).json()
        assert keys == client.get("/metrics.json").json()
        assert set(keys) == SEED_METRIC_KEYS
        assert keys["queue_depth"] == 3
    with open_store(str(tmp_path / "q.db")) as store:
        assert (
            store.metrics(now_ms()).admission_rejected == 3 if hasattr(store, "metrics") else True
        )


def test_jobs_page_by_cursor_and_filter_by_state_and_queue(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path), allow_commands=True) as client:
        for index in range(7):
            queue = "reports" if index % 2 else "default"
            job = {"id": f"j{index}", "command": "true", "queue": queue}
            assert client.post("/jobs", json=job, headers=bearer(GENERATED)).status_code == 201
        seen, cursor = [], None
        while True:
            params = {"limit": "3"} | ({"cursor": cursor} if cursor else {})
            page = client.get("/jobs", params=params).json()
            seen += [job["id"] for job in page["jobs"]]
            assert page["total"] == 7
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == [f"j{i}" for i in range(7)]
        reports = client.get("/jobs", params={"queue": "reports", "state": "pending"}).json()
        assert [job["id"] for job in reports["jobs"]] == ["j1", "j3", "j5"]
        assert client.get("/jobs", params={"state": "sleepy"}).status_code == 422
        assert client.get("/jobs", params={"limit": "100000"}).status_code == 422
        assert client.get("/jobs", params={"cursor": "x"}).status_code == 422
        detail = client.get("/jobs/j1").json()
        assert detail["id"] == "j1" and detail["attempt_history"] == []
        assert client.get("/jobs/nope").status_code == 404
        assert client.get("/status").json()["pending"] == 7
        assert client.get("/status", params={"queue": "reports"}).json()["total"] == 3
        assert client.get("/stats").json()["counts"]["pending"] == 7
        names = [queue["name"] for queue in client.get("/queues").json()["queues"]]
        assert names == ["default", "reports"]
        assert client.get("/workers").json()["workers"] == []
        assert client.get("/healthz").json() == {"ok": True}
        assert client.get("/openapi.json").json()["paths"]["/createJob"]["post"]


def test_job_control_over_http_is_audited_with_the_token_s_name(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, tokens=(WRITE, READ))
    with client_for(settings, allow_commands=True) as client:
        write = bearer(WRITE)
        for job_id in ("a", "b"):
            job = {"id": job_id, "command": "true", "queue": "reports"}
            assert client.post("/jobs", json=job, headers=write).status_code == 201
        assert client.post("/jobs/a/cancel", headers=write).json() == {
            "id": "a",
            "result": "cancelled",
        }
        assert client.post("/jobs/a/cancel", headers=write).status_code == 409
        assert client.post("/jobs/a/retry", headers=write).json()["result"] == "retried"
        assert client.delete("/jobs/b", headers=write).json()["result"] == "deleted"
        assert client.delete("/jobs/b", headers=write).status_code == 404
        assert client.post("/queues/reports/pause", headers=write).json()["paused"] is True
        assert client.post("/queues/reports/resume", headers=write).json()["paused"] is False
        assert client.post("/queues/bad name/pause", headers=write).status_code == 422
        assert client.post("/dlq/retry", headers=write, json={}).json()["retried"] == []
        pruned = client.post(
            "/prune", headers=write, json={"states": ["completed"], "older_than": "7d"}
        )
        assert pruned.json()["jobs"] == 0
        bad_prune = client.post(
            "/prune", headers=write, json={"states": ["pending"], "older_than": "7d"}
        )
        assert bad_prune.status_code == 422
    with open_store(str(tmp_path / "q.db")) as store:
        trail = store.actions()
    assert {(entry.face, entry.actor) for entry in trail} == {("http", "ci-bot")}
    done = [(entry.action, entry.touched) for entry in reversed(trail)]
    assert done == [  # the refused cancel and delete are not on record
        ("submit", 1),
        ("submit", 1),
        ("cancel", 1),
        ("retry", 1),
        ("delete", 1),
        ("pause", 1),
        ("resume", 1),
        ("retry", 0),  # every dead job, of none: not refused
        ("prune", 0),
    ]


def test_with_tokens_writes_need_a_write_token_and_reads_a_token(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, tokens=(WRITE, READ))
    with client_for(settings) as client:
        job = {"type": "email", "payload": {"secret": 1}}
        assert client.post("/jobs", json=job).status_code == 401
        assert client.post("/jobs", json=job, headers=bearer(READ)).status_code == 403
        wrong = {"Authorization": "Bearer " + "x" * 24}
        assert client.post("/jobs", json=job, headers=wrong).status_code == 401
        assert (
            client.post("/jobs", json=job, headers={"Authorization": "Basic x"}).status_code == 401
        )
        created = client.post("/jobs", json=job, headers=bearer(WRITE))
        assert created.status_code == 201
        job_id = created.json()["id"]
        assert client.get("/status").status_code == 401
        assert client.get("/status", headers=bearer(READ)).status_code == 200
        assert client.get("/status", headers=bearer(WRITE)).status_code == 200
    with open_store(str(tmp_path / "q.db")) as store:
        from store_helpers import claim, settle

        claimed = claim(store, now=now_ms())
        settle(store, claimed, output="the secret output", now=now_ms() + 5)
    with client_for(settings) as client:
        assert client.get(f"/jobs/{job_id}").status_code == 401
        reader = client.get(f"/jobs/{job_id}", headers=bearer(READ)).json()["attempt_history"][0]
        assert reader["output"] == "the secret output"


def test_every_response_carries_the_security_headers_and_no_cors(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path)) as client:
        for answer in (client.get("/status"), client.get("/nope"), client.post("/jobs", json={})):
            assert "default-src 'none'" in answer.headers["content-security-policy"]
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert "access-control-allow-origin" not in answer.headers
        assert client.get("/nope").status_code == 404
        assert client.put("/jobs").status_code == 405


def test_typed_job_defaults_come_from_the_type(tmp_path: Path) -> None:
    types = {"email": {"command": "cat", "queue": "mail", "priority": 4}}
    with client_for(settings_for(tmp_path, job_types=types)) as client:
        job = client.post("/jobs", json={"type": "email", "payload": [1, "two"]}).json()
    assert (job["queue"], job["priority"], job["payload"]) == ("mail", 4, [1, "two"])


def test_serve_refuses_a_bad_address_and_an_open_one_without_tokens(run_cli: RunCli) -> None:
    bad = run_cli("serve", "--addr", "nowhere")
    assert bad.returncode == 2 and "--addr must be HOST:PORT" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    exposed = run_cli("serve", "--addr", "0.0.0.0:8080")
    assert exposed.returncode == 1 and "without tokens" in exposed.stderr
    assert len(exposed.stderr.strip().splitlines()) == 1 and exposed.stdout == ""
    window = run_cli("dashboard", "--addr", "0.0.0.0:8081")
    assert window.returncode == 1 and "without tokens" in window.stderr


def test_writes_from_another_site_s_page_and_foreign_hosts_are_refused(tmp_path: Path) -> None:
    loopback = frozenset({"localhost", "127.0.0.1", "::1"})
    with client_for(settings_for(tmp_path), hosts=loopback) as client:
        local = {"Host": "127.0.0.1:8080"}
        job = {"type": "email"}
        evil = local | {"Origin": "http://evil.example"}
        assert client.post("/jobs", json=job, headers=evil).status_code == 403
        sneaky = local | {"Sec-Fetch-Site": "cross-site"}
        assert client.post("/jobs/x/cancel", headers=sneaky).status_code == 403
        same = local | {"Origin": "http://127.0.0.1:8080"}
        assert client.post("/jobs", json=job, headers=same).status_code == 201
        rebound = {"Host": "evil.example:8080"}
        assert client.get("/status", headers=rebound).status_code == 421
        assert client.get("/status", headers={"Host": "localhost:8080"}).status_code == 200
        blob = client.post("/jobs", content=b'{"type":"email"}', headers=local)
        assert blob.status_code == 415  # a body without its media type
        upper = local | {"Content-Type": "Application/JSON"}
        assert client.post("/jobs", content=b'{"type":"email"}', headers=upper).status_code == 201
    assert len(_stored_ids(tmp_path)) == 2


def test_an_unknown_token_is_refused_everywhere_and_reads_need_a_token(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, tokens=(WRITE, READ))
    with client_for(settings) as client:
        unknown = {"Authorization": "Bearer " + "u" * 40}
        for path in ("/status", "/jobs", "/workers", "/metrics", "/", "/healthz"):
            assert client.get(path, headers=unknown).status_code == 401, path
        job = {"type": "email", "payload": {"password": "hunter2"}}
        job_id = client.post("/jobs", json=job, headers=bearer(WRITE)).json()["id"]
        reads = ("/status", "/stats", "/queues", "/workers", "/metrics", "/metrics.json")
        for path in (*reads, "/jobs", f"/jobs/{job_id}", "/openapi.json", "/events"):
            anonymous = client.get(path)
            assert anonymous.status_code == 401, path
            assert "hunter2" not in anonymous.text and "Bearer TOKEN" in anonymous.json()["error"]
        for path in ("/", f"/?job={job_id}"):  # the page: its sign-in form, not one figure
            anonymous = client.get(path)
            assert anonymous.status_code == 401 and 'id="sign-in-form"' in anonymous.text
            assert "hunter2" not in anonymous.text and job_id not in anonymous.text
        shown = client.get(f"/jobs/{job_id}", headers=bearer(READ)).json()
        assert shown["payload"] == {"password": "hunter2"}
        assert "hunter2" in client.get(f"/?job={job_id}", headers=bearer(READ)).text
        assert client.get("/healthz").json() == {"ok": True}  # probes carry no token
        assert client.get("/static/dashboard.js").status_code == 200  # code, no data


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b'{"\\ud800": 1}', 422),  # a lone surrogate in a key the error names
        (b'{"type": "\\ud800"}', 422),
        (b'{"type": "email", "payload": NaN}', 400),
        (b'{"type": "email", "priority": ' + b"9" * 5000 + b"}", 400),
        (b"[" * 100_000, 400),
    ],
)
def test_odd_json_is_refused_without_a_server_error(
    tmp_path: Path, body: bytes, status: int
) -> None:
    with client_for(settings_for(tmp_path)) as client:
        answer = client.post("/jobs", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]


def test_a_database_that_cannot_be_opened_gives_503_at_once_not_a_hang(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    (tmp_path / "q.db").write_bytes(b"this is not a database" * 100)
    with client_for(settings) as client:
        submitted = client.post("/jobs", json={"type": "email"})
        assert submitted.status_code == 503 and "cannot be stored" in submitted.json()["error"]
        health = client.get("/healthz")
        assert health.status_code == 503 and health.json()["ok"] is False


def test_a_typed_only_server_asks_for_a_type_and_a_read_only_one_says_where_writes_go(
    tmp_path: Path,
) -> None:
    with client_for(settings_for(tmp_path)) as client:
        missing = client.post("/jobs", json={})
        assert missing.status_code == 422 and missing.json()["field"] == "type"
        assert "known: email" in missing.json()["error"]
    with client_for(settings_for(tmp_path), read_only=True) as client:
        refused = client.post("/jobs", json={"type": "email"})
        assert refused.status_code == 405 and "queuectl serve" in refused.json()["error"]


def test_an_address_given_as_a_url_is_a_usage_error(run_cli: RunCli) -> None:
    result = run_cli("serve", "--addr", "http://127.0.0.1:8095")
    assert result.returncode == 2 and "--addr must be HOST:PORT" in result.stderr


def test_without_tokens_anonymous_clients_read_and_submit_typed_jobs_only(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path), allow_commands=True) as client:
        assert client.post("/createJob", json=SEED).status_code == 201
        assert client.get("/jobs").json()["total"] == 1
        raw = client.post("/jobs", json={"id": "r", "command": "id"})
        assert raw.status_code == 401 and "q.db.http-token" in raw.json()["error"]
        job_id = client.get("/jobs").json()["jobs"][0]["id"]
        writes = [
            ("post", f"/jobs/{job_id}/cancel", None),
            ("post", f"/jobs/{job_id}/retry", None),
            ("delete", f"/jobs/{job_id}", None),
            ("post", "/dlq/retry", {}),
            ("post", "/queues/default/pause", None),
            ("post", "/queues/default/resume", None),
            ("post", "/prune", {"states": ["completed"], "older_than": "7d"}),
        ]
        for method, path, body in writes:
            answer = client.request(method, path, json=body)
            assert answer.status_code == 401, path
            assert answer.headers["www-authenticate"].startswith("Bearer")
        token = bearer(GENERATED)
        assert (
            client.post("/jobs", json={"id": "r", "command": "id"}, headers=token).status_code
            == 201
        )
        for method, path, body in writes[-2:]:
            assert client.request(method, path, json=body, headers=token).status_code == 200
    with open_store(str(tmp_path / "q.db")) as store:
        assert {(entry.actor, entry.action) for entry in store.actions()} == {
            ("anonymous", "submit"),  # the typed job
            ("generated", "submit"),  # the raw command
            ("generated", "resume"),
            ("generated", "prune"),
        }
    assert sorted(_stored_ids(tmp_path)) == sorted([job_id, "r"])


def test_a_server_off_loopback_answers_only_the_names_it_is_given(tmp_path: Path) -> None:
    from queuectl_tui.http.server import Address, allowed_hosts

    settings = settings_for(tmp_path, tokens=(WRITE, READ), http_hosts="queue.example.com")
    hosts = allowed_hosts(settings, Address("192.0.2.7", 8080))
    assert hosts == frozenset({"queue.example.com"})
    with client_for(settings, hosts=hosts) as client:
        read = bearer(READ)
        named = client.get("/status", headers=read | {"Host": "queue.example.com:8080"})
        assert named.status_code == 200
        for other in ("192.0.2.7:8080", "evil.example", "[::1", ""):
            answer = client.get("/status", headers=read | {"Host": other})
            assert answer.status_code == 421, other
    default = allowed_hosts(replace(settings, http_hosts=""), Address("192.0.2.7", 8080))
    assert default is not None and "192.0.2.7" in default and "localhost" not in default
    everywhere = allowed_hosts(replace(settings, http_hosts=""), Address("0.0.0.0", 8080))
    assert everywhere is not None and "localhost" in everywhere and "0.0.0.0" not in everywhere
    assert allowed_hosts(replace(settings, http_hosts="*"), Address("192.0.2.7", 8080)) is None
    loopback = allowed_hosts(settings, Address("127.0.0.1", 8080))
    assert loopback == frozenset({"localhost", "127.0.0.1", "::1"})  # http-hosts is not used


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("queue.example.com, 10.0.0.5", True),
        ("*", True),
        ("fe80::1", True),
        ("a b", False),
        ("evil.example/x", False),
        ("*,queue.example.com", False),
    ],
)
def test_http_hosts_is_checked_as_it_is_set(run_cli: RunCli, value: str, accepted: bool) -> None:
    result = run_cli("config", "set", "http-hosts", value)
    assert (result.returncode == 0) is accepted, result.stderr
    if not accepted:
        assert result.returncode == 2 and "http-hosts" in result.stderr


def test_dead_letters_by_time_of_death(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "q.db")) as store:
        store.enqueue_many([spec(id=i, max_retries=0) for i in "abc"], 3, NOW)
        for died in (300, 100, 200):  # a, b, c
            settle(store, claim(store), Outcome.FAILED, now=NOW + died, exit_code=1)
    with client_for(settings_for(tmp_path)) as client:
        seen, cursor = [], None
        while True:
            params = {"state": "dead", "order": "ended", "limit": "1"}
            page = client.get("/jobs", params=params | ({"cursor": cursor} if cursor else {}))
            seen += [job["id"] for job in page.json()["jobs"]]
            if (cursor := page.json()["next_cursor"]) is None:
                break
        assert seen == ["a", "c", "b"]
        assert client.get("/jobs", params={"order": "sideways"}).status_code == 422
        first = client.get("/jobs", params={"state": "dead", "order": "ended", "limit": "1"})
        cursor = first.json()["next_cursor"]
    with open_store(str(tmp_path / "q.db")) as store:  # the page's last job goes meanwhile
        assert store.delete(["a"], NOW + 400, None) == ["a"]
    with client_for(settings_for(tmp_path)) as client:
        params = {"state": "dead", "order": "ended", "cursor": cursor}
        assert [job["id"] for job in client.get("/jobs", params=params).json()["jobs"]] == [
            "c",
            "b",
        ]
        bad = client.get("/jobs", params={"order": "ended", "cursor": "x.1"})
        assert bad.status_code == 422


def test_pools_are_asked_to_stop_one_or_all_with_the_write_token(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path, tokens=(WRITE, READ))) as client:
        write = bearer(WRITE)
        refused = client.post("/pools/stop", json={}, headers=bearer(READ))
        assert refused.status_code == 403
        for body, field in (({"pool": 7}, "pool"), ({"force": "yes"}, "force")):
            answer = client.post("/pools/stop", json=body, headers=write)
            assert answer.status_code == 422 and answer.json()["field"] == field
        assert client.post("/pools/stop", json={"when": 1}, headers=write).status_code == 422
        missing = client.post("/pools/stop", json={"pool": "gone:1-x"}, headers=write)
        assert missing.status_code == 404 and "no running pool 'gone:1-x'" in missing.text
        with open_store(str(tmp_path / "q.db")) as store:
            assert store.stop_requested_since(0, "any") is None  # refusals record nothing
        answer = client.post("/pools/stop", json={"force": True}, headers=write)
        assert answer.status_code == 202
        assert answer.json() == {"pools": [], "workers": 0, "forced": True}
    with open_store(str(tmp_path / "q.db")) as store:
        assert store.stop_requested_since(0, "any") is StopKind.FORCED
