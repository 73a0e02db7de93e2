"""Who may do what over HTTP, against a real `queuectl serve`: another local user without a
token, the generated token's file, reads behind tokens, the Host allow-list off loopback,
failed tokens logged and slowed down, weak tokens refused at start."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from queuectl_tui.store import open_store

from helpers import wait_until

pytestmark = pytest.mark.slow

EMAIL = {"job_types": {"email": {"command": "cat"}}}
READ_TOKEN = "grafana-read-token-5d0c8e21a7f94b36"
WRITE_TOKEN = "ci-bot-write-token-e83f1a06c9d27b54"
TOKENS = {"QUEUECTL_READ_TOKEN": READ_TOKEN, "QUEUECTL_WRITE_TOKEN": WRITE_TOKEN}


def _free_port(host: str = "127.0.0.1") -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class Server:
    """`queuectl serve` on a free port of `host`, in its own folder."""

    def __init__(
        self,
        root: Path,
        *args: str,
        config: dict[str, object] | None = None,
        env: dict[str, str] | None = None,
        host: str = "127.0.0.1",
        probe_host: str | None = None,
    ) -> None:
        self.root = root
        self.db = root / "q.db"
        self.config = root / "config.json"
        self.config.write_text(json.dumps(EMAIL if config is None else config))
        bracketed = f"[{host}]" if ":" in host else host
        self.address = f"{bracketed}:{_free_port(host)}"
        self.url = f"http://{self.address}"
        base = {k: v for k, v in os.environ.items() if not k.startswith("QUEUECTL_")}
        self.env = base | (env or {})
        self.out = root / "serve.out"
        self.err = root / "serve.err"
        self.args = args
        self.probe = {"Host": probe_host} if probe_host else {}
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        return [
            *(sys.executable, "-m", "queuectl_tui"),
            *("--config", str(self.config), "--db", str(self.db)),
        ]

    def start(self) -> Server:
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                [*self.command(), "serve", "--addr", self.address, *self.args],
                stdout=out,
                stderr=err,
                cwd=self.root,
                env=self.env,
            )
        wait_until(self._healthy, timeout=30, what="the server to answer /healthz")
        return self

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(self.err.read_text())
        try:
            answer = httpx.get(self.url + "/healthz", headers=self.probe, timeout=2)
            return answer.status_code == 200
        except httpx.TransportError:
            return False

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.command(), *args],
            capture_output=True,
            text=True,
            cwd=self.root,
            env=self.env,
            timeout=60,  # a server that starts when it should not fails the test, not hangs it
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            assert self.proc.wait(timeout=30) == 0, self.err.read_text()
        self.proc = None


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


def _serve(servers: list[Server], root: Path, *args: str, **kwargs: object) -> Server:
    server = Server(root, *args, **kwargs)  # type: ignore[arg-type]
    servers.append(server)
    return server.start()


def _stored(db: Path) -> dict[str, str | None]:
    with open_store(str(db)) as store:
        return {job.id: job.job_type for job in store.list_jobs(limit=1000)}


SETPRIV = shutil.which("setpriv")
CURL = shutil.which("curl")


@pytest.mark.skipif(
    os.geteuid() != 0 or SETPRIV is None or CURL is None,
    reason="needs root, setpriv and curl to run a client as the user nobody",
)
def test_another_local_user_runs_no_command_and_steers_nothing_without_the_token(
    servers: list[Server], tmp_path: Path
) -> None:
    server = _serve(servers, tmp_path, "--allow-commands")

    def as_nobody(path: str, body: object) -> tuple[int, str]:
        assert SETPRIV is not None and CURL is not None
        result = subprocess.run(
            [
                *(SETPRIV, "--reuid=nobody", "--regid=nogroup", "--clear-groups"),
                *(CURL, "-s", "-w", "\n%{http_code}", "-X", "POST", server.url + path),
                *("-H", "Content-Type: application/json", "-d", json.dumps(body)),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        text, _, status = result.stdout.rpartition("\n")
        return int(status), text

    marker = tmp_path / "ran-as-root"
    raw = {"id": "pwn", "command": f"id > {marker}"}
    status, text = as_nobody("/jobs", raw)
    assert status == 401 and server.root.name in json.loads(text)["error"]  # where the token is
    for path, body in [
        ("/queues/default/pause", {}),
        ("/prune", {"states": ["completed"], "older_than": "0s"}),
        ("/dlq/retry", {}),
    ]:
        assert as_nobody(path, body)[0] == 401, path
    assert as_nobody("/createJob", {"type": "email", "payload": {"to": "x"}})[0] == 201
    assert stat.S_IMODE(server.db.stat().st_mode) == 0o600  # which nobody cannot open
    assert list(_stored(server.db).values()) == ["email"]  # the typed job alone
    with open_store(str(server.db)) as store:
        trail = [(entry.actor, entry.action) for entry in store.actions()]
    assert trail == [("anonymous", "submit")]  # nothing paused, pruned or retried
    # The server's own user finds the token and may do all of it.
    token = server.cli("serve", "--show-token").stdout.strip()
    write = {"Authorization": f"Bearer {token}"}
    assert httpx.post(server.url + "/jobs", json=raw, headers=write).status_code == 201
    pause = httpx.post(server.url + "/queues/default/pause", headers=write)
    assert pause.status_code == 200


def test_the_generated_token_is_made_once_0600_printed_and_found_by_the_cli(
    servers: list[Server], tmp_path: Path
) -> None:
    server = _serve(servers, tmp_path)
    token_file = tmp_path / "q.db.http-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert len(token) >= 32
    printed = server.out.read_text()
    assert f"{server.url}/?token={token}" in printed and str(token_file) in printed
    assert "Anonymous clients may read and submit typed jobs" in printed
    shown = server.cli("serve", "--show-token")
    assert shown.returncode == 0 and shown.stdout == token + "\n"

    seed = {"type": "email", "payload": {"email": "user@example.com"}}
    assert httpx.post(server.url + "/createJob", json=seed).status_code == 201  # anonymous
    assert httpx.get(server.url + "/jobs").json()["total"] == 1  # reads stay open
    assert httpx.post(server.url + "/queues/default/pause").status_code == 401
    write = {"Authorization": f"Bearer {token}"}
    assert httpx.post(server.url + "/queues/default/pause", headers=write).status_code == 200

    server.stop()
    server.start()  # the same token again
    assert token_file.read_text().strip() == token
    assert f"?token={token}" in server.out.read_text()
    server.stop()

    token_file.chmod(0o644)
    refused = server.cli("serve", "--addr", server.address)
    assert refused.returncode != 0 and "not 0600" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and token not in refused.stderr
    assert server.cli("serve", "--show-token").returncode != 0


def test_the_cli_finds_the_token_without_importing_the_http_stack(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text("{}")
    base = [sys.executable, "-X", "importtime", "-m", "queuectl_tui", "--config", str(config)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUECTL_")}
    missing = subprocess.run(
        [*base, "--db", str(tmp_path / "q.db"), "serve", "--show-token"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert missing.returncode == 1 and "no token yet" in missing.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in missing.stderr.splitlines()}
    assert "queuectl_tui.http_token" in imported
    assert not {name for name in imported if name.split(".")[0] in ("starlette", "uvicorn")}


def test_with_tokens_configured_every_read_needs_one(servers: list[Server], tmp_path: Path) -> None:
    server = _serve(servers, tmp_path, env=TOKENS)
    assert not (tmp_path / "q.db.http-token").exists()  # configured tokens: none generated
    assert "Every route but /healthz needs a token" in server.out.read_text()
    reader = {"Authorization": f"Bearer {READ_TOKEN}"}
    writer = {"Authorization": f"Bearer {WRITE_TOKEN}"}
    job = {"type": "email", "payload": {"password": "hunter2"}}
    assert httpx.post(server.url + "/jobs", json=job).status_code == 401
    assert httpx.post(server.url + "/jobs", json=job, headers=reader).status_code == 403
    job_id = httpx.post(server.url + "/jobs", json=job, headers=writer).json()["id"]
    paths = ["/jobs", f"/jobs/{job_id}", "/status", "/stats", "/queues", "/workers"]
    for path in [*paths, "/metrics", "/openapi.json", "/"]:
        anonymous = httpx.get(server.url + path)
        assert anonymous.status_code == 401, path
        assert "hunter2" not in anonymous.text and job_id not in anonymous.text
        assert httpx.get(server.url + path, headers=reader).status_code == 200, path
        assert httpx.get(server.url + path, headers=writer).status_code == 200, path
    assert httpx.get(server.url + "/healthz").json() == {"ok": True}
    shown = server.cli("serve", "--show-token")
    assert shown.returncode == 1 and "QUEUECTL_WRITE_TOKEN" in shown.stderr


def _non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (from `hostname -I`)."""
    try:
        found = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for address in found.stdout.split():
        if "." in address and not address.startswith("127."):
            try:
                with socket.socket() as sock:
                    sock.bind((address, 0))
            except OSError:
                continue
            return address
    return None


def test_off_loopback_only_the_allowed_host_names_are_answered(
    servers: list[Server], tmp_path: Path
) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to listen on")
    reader = {"Authorization": f"Bearer {READ_TOKEN}"}
    (tmp_path / "default").mkdir()
    server = _serve(servers, tmp_path / "default", env=TOKENS, host=address)
    port = server.address.rsplit(":", 1)[1]
    hostname = socket.gethostname().lower()
    for name in (address, hostname):
        answer = httpx.get(server.url + "/status", headers=reader | {"Host": f"{name}:{port}"})
        assert answer.status_code == 200, name
    rebound = httpx.get(server.url + "/status", headers=reader | {"Host": f"evil.example:{port}"})
    assert rebound.status_code == 421 and "evil.example" in rebound.json()["error"]
    assert "http-hosts" in server.out.read_text()
    server.stop()

    (tmp_path / "set").mkdir()
    config = EMAIL | {"http_hosts": "queue.example.com"}
    server = _serve(
        servers,
        tmp_path / "set",
        env=TOKENS,
        host=address,
        config=config,
        probe_host="queue.example.com",
    )
    named = httpx.get(server.url + "/status", headers=reader | {"Host": "queue.example.com"})
    assert named.status_code == 200
    by_address = httpx.get(server.url + "/status", headers=reader)
    assert by_address.status_code == 421
    health = httpx.get(server.url + "/healthz", headers={"Host": "evil.example"})
    assert health.status_code == 421  # not even the open route


def test_failed_tokens_are_logged_and_slowed_down_per_address(
    servers: list[Server], tmp_path: Path
) -> None:
    server = _serve(servers, tmp_path, env=TOKENS)
    guesses = 40
    window_s = 3.0

    async def attack() -> tuple[int, int, int]:
        """Parallel wrong guesses for `window_s`; meanwhile a probe and a right token from
        another address must still be answered (5 s client timeouts)."""
        answered = 0

        async def guess(client: httpx.AsyncClient, number: int) -> None:
            nonlocal answered
            wrong = {"Authorization": f"Bearer guess-{number:04d}-{'x' * 32}"}
            try:
                answer = await client.get("/status", headers=wrong, timeout=window_s)
            except httpx.TimeoutException:
                return
            assert answer.status_code in (401, 429), answer.text
            answered += answer.status_code == 401  # 429: too many waiting, not looked at

        limits = httpx.Limits(max_connections=guesses)
        async with httpx.AsyncClient(base_url=server.url, limits=limits) as attacker:
            attack = asyncio.gather(*(guess(attacker, n) for n in range(guesses)))
            await asyncio.sleep(0.5)
            transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
            async with httpx.AsyncClient(base_url=server.url, transport=transport) as other:
                right = await other.get(
                    "/status", headers={"Authorization": f"Bearer {READ_TOKEN}"}, timeout=5
                )
                probe = await other.get("/healthz", timeout=5)
            await attack
        return answered, right.status_code, probe.status_code

    answered, right, probe = asyncio.run(attack())
    assert (right, probe) == (200, 200)
    # Unthrottled, all 40 are refused at once; slowed, the delays of one address add up
    # (0.1 + 0.2 + 0.4 + 0.8 + 1.6 s): a handful fit in the window, whatever the load.
    assert answered <= 12, answered
    wait_until(
        lambda: "failed authentication" in server.err.read_text(),
        timeout=30,
        what="the failure to be logged",
    )
    lines = [line for line in server.err.read_text().splitlines() if "failed auth" in line]
    assert "client 127.0.0.1, GET /status, unknown bearer token" in lines[0]
    assert not any("guess-" in line or "x" * 32 in line for line in lines)  # never the token


@pytest.mark.parametrize(
    ("config", "env", "named"),
    [
        ({}, {"QUEUECTL_WRITE_TOKEN": "short-token-1234"}, "QUEUECTL_WRITE_TOKEN"),
        ({}, {"QUEUECTL_READ_TOKEN": "a" * 40}, "QUEUECTL_READ_TOKEN"),
        (
            {"http_tokens": {"ci": {"token": "c" * 16 + "d" * 15, "access": "write"}}},
            {},
            "http_tokens.ci",
        ),
    ],
)
def test_weak_tokens_are_refused_at_start_by_name_never_by_value(
    tmp_path: Path, config: dict[str, object], env: dict[str, str], named: str
) -> None:
    server = Server(tmp_path, config=EMAIL | config, env=env)
    result = server.cli("serve", "--addr", server.address)
    assert result.returncode == 1 and named in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""
    secrets = [*env.values(), *(t["token"] for t in config.get("http_tokens", {}).values())]  # type: ignore[attr-defined]
    assert not any(secret in result.stderr for secret in secrets)
    assert server.cli("status").returncode == 0  # other commands never send it
