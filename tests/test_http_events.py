"""GET /events tells a page that the queue changed (server-sent events), and a page where
reads need a token signs in without a figure shown first."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from http_helpers import READ, WRITE, bearer, client_for, served, settings_for
from store_helpers import NOW

from queuectl_tui.http import events
from queuectl_tui.store import open_store

from helpers import spec


def _changes(body: str) -> list[int]:
    versions = []
    for block in body.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if lines.get("event") == "change":
            versions.append(json.loads(lines["data"])["version"])
    return versions


def test_a_change_by_another_process_is_told_on_the_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events, "STREAM_FOR", 3.0)  # the stream ends by itself, then read
    open_store(str(tmp_path / "q.db")).close()

    def enqueue_later() -> None:
        time.sleep(1.0)
        with open_store(str(tmp_path / "q.db")) as other:
            other.enqueue(spec(id="from-elsewhere"), 3, NOW)

    writer = threading.Thread(target=enqueue_later)
    with client_for(settings_for(tmp_path)) as client:
        writer.start()
        answer = client.get("/events")
        writer.join()
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.text.startswith("retry: 1000\n\n")
    versions = _changes(answer.text)
    assert versions[0] == 0  # told at once as it opens: a page reads what it missed
    assert len(versions) >= 2 and versions == sorted(set(versions))


def test_event_streams_past_the_limit_are_refused(tmp_path: Path) -> None:
    with client_for(settings_for(tmp_path)) as client:
        served(client).event_streams.limit = 0
        refused = client.get("/events")
        assert refused.status_code == 503 and "change events" in refused.json()["error"]
        assert served(client).event_streams.open == 0


def test_where_reads_need_a_token_the_page_is_a_sign_in_form_without_figures(
    tmp_path: Path,
) -> None:
    with open_store(str(tmp_path / "q.db")) as store:
        store.enqueue(spec(id="secret-job-id"), 3, NOW)
    with client_for(settings_for(tmp_path, tokens=(WRITE, READ))) as client:
        assert client.get("/events").status_code == 401
        page = client.get("/")
        assert page.status_code == 401 and page.headers["content-type"].startswith("text/html")
        assert 'id="sign-in-form"' in page.text and 'data-sign-in="1"' in page.text
        assert "secret-job-id" not in page.text
        assert "/?token=" not in page.text
        signed_in = client.get("/", headers=bearer(READ))
        assert signed_in.status_code == 200 and "secret-job-id" in signed_in.text
        assert 'id="sign-in-form"' not in signed_in.text
        assert client.post("/", headers=bearer(READ)).status_code in (401, 405)


def test_a_cookie_the_server_no_longer_knows_gets_the_sign_in_form_and_is_dropped(
    tmp_path: Path,
) -> None:
    with client_for(settings_for(tmp_path, tokens=(WRITE, READ))) as client:
        assert client.get("/", params={"token": READ.secret}).status_code == 200
        [name] = list(client.cookies.keys())  # the browser's way in left its cookie
        client.cookies.set(name, "stale-token-from-before-a-restart-0000")
        page = client.get("/")
        assert page.status_code == 401 and 'id="sign-in-form"' in page.text
        assert name in page.headers["set-cookie"] and "Max-Age=0" in page.headers["set-cookie"]
        assert client.get("/status").status_code == 401  # elsewhere it is still refused


def test_without_a_change_feed_a_change_is_told_every_two_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from queuectl_tui.http import news

    def gone(self: object) -> None:  # as a listener whose store could not be opened
        return None

    monkeypatch.setattr(events, "STREAM_FOR", 4.5)
    monkeypatch.setattr(news.ChangeListener, "run", gone)  # its thread ends at once
    with client_for(settings_for(tmp_path)) as client:
        versions = _changes(client.get("/events").text)
    assert 2 <= len(versions) <= 4  # the first at once, then about one per 2 s
