"""A job's output over HTTP: a step from a cursor as JSON, and followed as server-sent events
until the job is finished; who may read it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from http_helpers import GENERATED as WRITE_GENERATED
from http_helpers import READ, WRITE, bearer, client_for, served, settings_for
from store_helpers import NOW, claim, settle

from queuectl_tui.models import OutputChunk, Stream
from queuectl_tui.store import OutputAppend, Store, open_store

from helpers import spec


def _running_job(tmp_path: Path) -> tuple[Store, object]:
    store = open_store(str(tmp_path / "q.db"))
    store.enqueue(spec(id="build/42", command="make"), 3, NOW)
    job = claim(store)
    _print(store, job, 0, ("compiling\n", Stream.STDOUT), ("warning: old\n", Stream.STDERR))
    return store, job


def _print(store: Store, job, first: int, *lines: tuple[str, Stream]) -> None:
    chunks, offset = [], first * 100
    for seq, (text, stream) in enumerate(lines, start=first):
        chunks.append(OutputChunk(seq, stream, text, NOW + seq, offset))
        offset += len(text)
    store.append_output([OutputAppend(job.id, job.runs, job.worker_id, chunks, 0)])


def _events(body: str) -> list[tuple[str, str, dict]]:
    found = []
    for block in body.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if ": " in line and line[0] != ":"
        )
        if "event" in fields:
            found.append((fields["event"], fields["id"], json.loads(fields["data"])))
    return found


def test_a_step_of_output_from_a_cursor(tmp_path: Path) -> None:
    store, job = _running_job(tmp_path)
    with store, client_for(settings_for(tmp_path)) as client:
        first = client.get("/output/build/42")
        assert first.status_code == 200
        body = first.json()
        assert (body["job"], body["state"], body["run"], body["ended"]) == (
            "build/42",
            "processing",
            1,
            False,
        )
        assert [(c["stream"], c["text"]) for c in body["chunks"]] == [
            ("stdout", "compiling\n"),
            ("stderr", "warning: old\n"),
        ]
        _print(store, job, 2, ("linking\n", Stream.STDOUT))
        more = client.get("/output/build/42", params={"cursor": body["cursor"]}).json()
        assert [c["text"] for c in more["chunks"]] == ["linking\n"] and not more["started"]
        assert client.get("/output/nope").status_code == 404
        bad = client.get("/output/build/42", params={"cursor": "1.x"})
        assert bad.status_code == 422 and bad.json()["field"] == "cursor"


def test_following_streams_events_until_the_job_is_finished(tmp_path: Path) -> None:
    store, job = _running_job(tmp_path)

    def finish_later() -> None:
        with open_store(str(tmp_path / "q.db")) as other:
            time.sleep(0.6)
            _print(other, job, 2, ("done\n", Stream.STDOUT))
            settle(other, job)

    finisher = threading.Thread(target=finish_later)
    with store, client_for(settings_for(tmp_path)) as client:
        finisher.start()
        answer = client.get("/output/build/42", params={"follow": "1"})
        finisher.join()
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = _events(answer.text)
    names = [name for name, _, _ in events]
    assert names[0] == "output" and names[-1] == "end" and names.count("end") == 1
    texts = [c["text"] for name, _, data in events if name == "output" for c in data["chunks"]]
    assert texts == ["compiling\n", "warning: old\n", "done\n"]
    assert events[-1][2] == {"state": "completed"}
    # Resuming from an event's id (a browser's Last-Event-ID) goes on from there.
    with client_for(settings_for(tmp_path)) as client:
        resumed = client.get(
            "/output/build/42", params={"follow": "1"}, headers={"Last-Event-ID": events[0][1]}
        )
    after = [c["text"] for n, _, d in _events(resumed.text) if n == "output" for c in d["chunks"]]
    assert after == ["done\n"]


def test_output_needs_a_token_that_may_read_when_tokens_are_configured(tmp_path: Path) -> None:
    store, _ = _running_job(tmp_path)
    with store, client_for(settings_for(tmp_path, tokens=(WRITE, READ))) as client:
        assert client.get("/output/build/42").status_code == 401
        assert client.get("/output/build/42", headers=bearer(READ)).status_code == 200


def test_streams_past_the_limit_are_refused(tmp_path: Path) -> None:
    store, _ = _running_job(tmp_path)
    with store, client_for(settings_for(tmp_path)) as client:
        served(client).followers.limit = 0
        refused = client.get("/output/build/42", params={"follow": "1"})
        assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
        assert served(client).followers.open == 0
        assert client.get("/output/build/42").status_code == 200  # a one-off read is not a stream


def test_error_groups_over_http(tmp_path: Path) -> None:
    from queuectl_tui.models import Outcome

    store = open_store(str(tmp_path / "q.db"))
    with store:
        for index in range(2):
            store.enqueue(spec(id=f"q{index}", max_retries=0), 3, NOW)
            job = claim(store)
            settle(
                store,
                job,
                Outcome.FAILED,
                exit_code=1,
                output=f"quota /d/{index}",
                error="exit code 1",
            )
    with client_for(settings_for(tmp_path)) as client:
        body = client.get("/dlq/groups").json()
        [group] = body["groups"]
        assert (body["state"], group["count"], group["fingerprint"]) == (
            "dead",
            2,
            "exit code 1 · quota <path>",
        )
        assert client.post("/dlq/groups/retry", json=group).status_code == 401  # a write
        token = bearer(WRITE_GENERATED)
        wanted = {"fingerprint": group["fingerprint"]}
        retried = client.post("/dlq/groups/retry", json=wanted, headers=token)
        assert retried.status_code == 200 and sorted(retried.json()["done"]) == ["q0", "q1"]
        missing = client.post("/dlq/groups/delete", json={"fingerprint": "nope"}, headers=token)
        assert missing.status_code == 404
        bad = client.post("/dlq/groups/delete", json={"x": 1}, headers=token)
        assert bad.status_code == 422
        assert client.get("/dlq/groups", params={"state": "x"}).status_code == 422


def test_jobs_can_be_searched_over_http(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "q.db"))
    with store:
        store.enqueue(spec(id="deploy-1", command="./deploy"), 3, NOW)
        store.enqueue(spec(id="mail-1", command="send"), 3, NOW)
    with client_for(settings_for(tmp_path)) as client:
        found = client.get("/jobs", params={"q": "state:pending deploy"}).json()
        assert [job["id"] for job in found["jobs"]] == ["deploy-1"] and found["total"] == 1
        bad = client.get("/jobs", params={"q": "stat:pending"})
        assert bad.status_code == 422 and bad.json()["field"] == "q"
        assert client.get("/jobs", params={"q": " "}).status_code == 422
