"""The HTTP face as a real server: uvicorn on a free loopback port, real clients, a real pool;
and a load of 8 concurrent clients against a full queue."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from queuectl_tui.models import JobState
from queuectl_tui.store import open_store

from helpers import wait_until

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    def __init__(self, root: Path, config: dict[str, object], *args: str) -> None:
        self.root = root
        self.db = root / "q.db"
        self.config = root / "config.json"
        self.config.write_text(json.dumps(config))
        self.url = f"http://127.0.0.1:{_free_port()}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUECTL_")}
        self.log = open(root / "serve.log", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [*self.command(), "serve", "--addr", self.url.removeprefix("http://"), *args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=root,
            env=self.env,
        )
        wait_until(self._healthy, timeout=30, what="the server to answer /healthz")

    def command(self) -> list[str]:
        return [
            *(sys.executable, "-m", "queuectl_tui"),
            *("--config", str(self.config), "--db", str(self.db)),
        ]

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError((self.root / "serve.log").read_text())
        try:
            return httpx.get(self.url + "/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    @property
    def token(self) -> str:
        """The write token the server generated beside its database."""
        return (self.root / "q.db.http-token").read_text().strip()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.command(), *args], capture_output=True, text=True, cwd=self.root, env=self.env
        )

    def stop(self) -> None:
        self.proc.terminate()
        assert self.proc.wait(timeout=30) == 0, (self.root / "serve.log").read_text()
        self.log.close()


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[object]:
    started: list[Server] = []

    def make(config: dict[str, object], *args: str) -> Server:
        server = Server(tmp_path, config, *args)
        started.append(server)
        return server

    yield make
    for server in started:
        if server.proc.poll() is None:
            server.stop()


def test_a_submitted_job_is_run_by_a_pool_and_seen_over_http(make_server, tmp_path: Path) -> None:
    record = f"{{ cat; echo; }} >> {tmp_path}/sent.jsonl"
    server = make_server({"job_types": {"email": {"command": record}}})
    seed = {"type": "email", "payload": {"email": "user@example.com"}, "idempotency_key": "w-1"}
    created = httpx.post(server.url + "/createJob", json=seed)
    assert created.status_code == 201
    assert httpx.post(server.url + "/createJob", json=seed).status_code == 200
    job_id = created.json()["id"]
    assert server.cli("worker", "start", "--count", "1", "--detach").returncode == 0
    try:
        wait_until(
            lambda: httpx.get(f"{server.url}/jobs/{job_id}").json()["state"] == "completed",
            timeout=30,
            what="the job to complete",
        )
        workers = httpx.get(server.url + "/workers").json()["workers"]
        assert workers and workers[0]["status"] in ("idle", "busy")
    finally:
        server.cli("worker", "stop", "--wait")
    assert json.loads((tmp_path / "sent.jsonl").read_text()) == seed["payload"]
    detail = httpx.get(f"{server.url}/jobs/{job_id}").json()
    assert [a["outcome"] for a in detail["attempt_history"]] == ["completed"]
    assert httpx.get(server.url + "/status").json()["completed"] == 1
    scraped = httpx.get(server.url + "/metrics")
    assert scraped.headers["content-type"].startswith("text/plain")
    assert 'queuectl_attempts_total{outcome="completed",queue="default"} 1.0' in scraped.text
    assert "queuectl_run_time_seconds_count 1.0" in scraped.text
    keys = httpx.get(server.url + "/metrics", headers={"Accept": "application/json"}).json()
    assert (keys["success_count"], keys["queue_depth"], keys["active_workers"]) == (1, 0, 0)


def test_eight_clients_against_a_full_queue_get_201_or_429_and_nothing_else(
    make_server,
) -> None:
    depth = 5000
    server = make_server({"max_queue_depth": depth}, "--allow-commands")
    headers = {"Authorization": f"Bearer {server.token}"}  # raw commands need it

    def client(number: int) -> list[tuple[str, int]]:
        answers = []
        with httpx.Client(base_url=server.url, timeout=60, headers=headers) as http:
            for index in range(2000):
                job_id = f"c{number}-{index}"
                answer = http.post("/jobs", json={"id": job_id, "command": "true"})
                answers.append((job_id, answer.status_code))
        return answers

    with ThreadPoolExecutor(8) as pool:
        answers = [answer for batch in pool.map(client, range(8)) for answer in batch]
    statuses = {status for _, status in answers}
    assert statuses <= {201, 429}, statuses
    created = {job_id for job_id, status in answers if status == 201}
    assert len(created) == depth
    with open_store(str(server.db)) as store:
        stored = {job.id for job in store.list_jobs(limit=20_000)}
        assert store.counts()[JobState.PENDING] == depth
    assert stored == created  # every 201 is a stored job; every 429 stored nothing


def test_each_request_is_a_line_of_the_access_log_unless_turned_off(
    make_server, tmp_path: Path
) -> None:
    server = make_server({})
    assert httpx.get(server.url + "/jobs/none-such?token=secret-in-query").status_code == 404
    server.stop()
    lines = (tmp_path / "serve.log").read_text().splitlines()
    [line] = [line for line in lines if "/jobs/none-such" in line]
    assert '"GET /jobs/none-such HTTP/1.1" 404 ' in line and line.endswith(" ms")
    assert "127.0.0.1:" in line and "secret-in-query" not in line
    quiet = make_server({"http_access_log": "off"})
    assert httpx.get(quiet.url + "/jobs/none-such").status_code == 404
    quiet.stop()
    assert "/jobs/none-such" not in (tmp_path / "serve.log").read_text()
