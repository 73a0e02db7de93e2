"""Hostile clients against a real `queuectl serve`: huge and numerous headers, slow heads and
bodies, idle sockets past the connection limits, a flood of reads nobody reads. In each the
server closes the attackers and /healthz answers a fresh client; a normal client still works."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from test_http_server import Server
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from queuectl_tui.http.connections import Connections
from queuectl_tui.http.transport import LimitedProtocol

from helpers import wait_until

pytestmark = pytest.mark.slow

EMAIL = {"email": {"command": "cat"}}
HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(**limits: object) -> Server:
        server = Server(tmp_path, {"job_types": EMAIL, **limits})
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.stop()


def port_of(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def healthy(server: Server) -> bool:
    """/healthz from a fresh client answers 200 (a generous timeout: the machine is busy)."""
    return httpx.get(server.url + "/healthz", timeout=15).status_code == 200


def connect(server: Server, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port_of(server)))
    return sock


def closed(sock: socket.socket) -> bool:
    """True once the server has closed it (what it sent before is read and dropped)."""
    sock.setblocking(False)
    try:
        while data := sock.recv(65536):
            del data
        return True
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True


def all_closed(socks: list[socket.socket], timeout: float) -> None:
    wait_until(lambda: all(closed(s) for s in socks), timeout=timeout, what="the server to close")


def answer(sock: socket.socket, timeout: float = 30) -> bytes:
    """Everything the server sends until it closes."""
    sock.settimeout(timeout)
    received = b""
    try:
        while data := sock.recv(65536):
            received += data
    except ConnectionResetError:
        pass
    return received


def stream_huge_header(server: Server, mib: int, answers: list[bytes]) -> None:
    """One header of `mib` MiB, sent as a client that reads while it writes would."""
    with connect(server) as sock:
        early = b""
        try:
            sock.sendall(HEAD + b"X-Big: ")
            for _ in range(mib * 16):
                sock.sendall(b"a" * 65536)
                with contextlib.suppress(BlockingIOError):
                    early = sock.recv(65536, socket.MSG_DONTWAIT)
                if early:
                    break  # answered: stop sending
        except OSError:
            pass  # the server stopped reading and closed: what the test expects
        answers.append(early + answer(sock))


def rss_kib(server: Server) -> int:
    status = Path(f"/proc/{server.proc.pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1])


def test_one_huge_header_gets_431_and_the_server_keeps_answering(serve) -> None:
    server = serve()
    answers: list[bytes] = []
    attacker = threading.Thread(target=stream_huge_header, args=(server, 64, answers))
    attacker.start()
    while attacker.is_alive():
        assert healthy(server)
        attacker.join(0.2)
    assert answers[0].startswith(b"HTTP/1.1 431 "), answers[0][:200]
    assert b"larger than 65,536 bytes" in answers[0]


def test_many_huge_headers_neither_stall_the_server_nor_fill_its_memory(serve) -> None:
    server = serve(http_header_limit=16 * 1024)
    before = rss_kib(server)
    answers: list[bytes] = []
    attackers = [
        threading.Thread(target=stream_huge_header, args=(server, 32, answers)) for _ in range(8)
    ]
    for attacker in attackers:
        attacker.start()
    while any(attacker.is_alive() for attacker in attackers):
        assert healthy(server)
        time.sleep(0.2)
    assert len(answers) == 8 and all(a.startswith(b"HTTP/1.1 431 ") for a in answers), answers
    assert rss_kib(server) - before < 64 * 1024  # 8 x 32 MiB sent, none of it kept


def test_too_many_headers_get_431(serve) -> None:
    server = serve(http_header_count=20)
    with connect(server) as sock:
        many = b"".join(b"X-%d: 1\r\n" % n for n in range(21))
        sock.sendall(HEAD + many + b"\r\n")
        refused = answer(sock)
    assert refused.startswith(b"HTTP/1.1 431 ") and b"at most 20 headers" in refused
    with connect(server) as sock:
        close = b"Connection: close\r\n"  # the answer ends with the connection
        sock.sendall(HEAD + close + b"".join(b"X-%d: 1\r\n" % n for n in range(18)) + b"\r\n")
        assert answer(sock, 15).split(b"\r\n")[0] == b"HTTP/1.1 200 OK"


def drip(socks: list[socket.socket], byte: bytes, stop: threading.Event) -> None:
    while not stop.is_set():
        for sock in socks:
            with contextlib.suppress(OSError):  # closed by the server
                sock.send(byte)
        stop.wait(0.2)


def attack_with_drips(server: Server, start: bytes, byte: bytes, count: int) -> None:
    socks = [connect(server) for _ in range(count)]
    for sock in socks:
        sock.sendall(start)
    stop = threading.Event()
    dripping = threading.Thread(target=drip, args=(socks, byte, stop))
    dripping.start()
    try:
        for _ in range(5):
            assert healthy(server)
        all_closed(socks, timeout=30)
        assert healthy(server)
    finally:
        stop.set()
        dripping.join()
        for sock in socks:
            sock.close()


def test_a_slowloris_head_is_closed_at_the_header_timeout(serve) -> None:
    server = serve(http_header_timeout=1.0, http_idle_timeout=60.0)
    attack_with_drips(server, HEAD + b"X-Slow: ", b"a", 50)


def test_a_slow_body_is_closed_at_the_body_timeout(serve) -> None:
    server = serve(http_body_timeout=1.0, http_idle_timeout=60.0)
    head = (
        b"POST /createJob HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n{"
    )
    attack_with_drips(server, head, b" ", 50)


def test_sockets_that_never_send_are_closed_at_the_idle_timeout(serve) -> None:
    server = serve(http_idle_timeout=1.0)
    socks = [connect(server) for _ in range(50)]
    assert healthy(server)
    all_closed(socks, timeout=30)
    for sock in socks:
        sock.close()


def still_open(socks: list[socket.socket]) -> int:
    return sum(not closed(sock) for sock in socks)


def test_idle_sockets_past_the_per_client_limit_make_room_for_a_new_client(serve) -> None:
    server = serve(http_max_client_connections=8, http_idle_timeout=120.0)
    mine = [connect(server) for _ in range(30)]
    wait_until(lambda: still_open(mine) <= 8, timeout=30, what="the server to close the excess")
    for _ in range(5):
        assert healthy(server)  # from the same address: an idle attacker makes room
    # Another address has its own allowance: none of its connections is closed.
    theirs = [connect(server, "127.0.0.2") for _ in range(8)]
    time.sleep(1)
    assert still_open(theirs) == 8
    for sock in mine + theirs:
        sock.close()


def test_idle_sockets_past_the_overall_limit_make_room_for_a_new_client(serve) -> None:
    server = serve(http_max_connections=12, http_idle_timeout=120.0)
    socks = [connect(server, f"127.0.0.{2 + n % 5}") for n in range(40)]
    wait_until(lambda: still_open(socks) <= 12, timeout=30, what="the server to close the excess")
    for _ in range(5):
        assert healthy(server)
    for sock in socks:
        sock.close()


def seed_jobs(server: Server, count: int) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for n in range(count):
            job = {"type": "email", "payload": {"n": n, "text": "x" * 500}}
            assert client.post("/createJob", json=job).status_code == 201


def test_a_flood_of_unread_reads_neither_starves_healthz_nor_holds_the_server(serve) -> None:
    server = serve(http_read_concurrency=2, http_idle_timeout=3.0)
    seed_jobs(server, 500)
    page = b"GET /jobs?limit=500 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    socks = []
    for _ in range(60):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port_of(server)))
        sock.sendall(page * 20)  # and never read an answer
        socks.append(sock)
    for _ in range(10):
        assert healthy(server)
    reader = httpx.get(server.url + "/jobs?limit=500", timeout=30)
    assert reader.status_code in (200, 503), reader.text
    if reader.status_code == 503:
        assert reader.headers["Retry-After"] == "1" and "try again" in reader.json()["error"]
    all_closed(socks, timeout=60)
    assert healthy(server)
    for sock in socks:
        sock.close()


def test_a_normal_client_keeps_its_connection_sends_a_big_body_and_leaves_one_log_line(
    serve,
) -> None:
    server = serve(http_header_count=20, http_header_limit=4096)
    with connect(server) as sock:  # keep-alive: three requests on one connection
        sock.settimeout(15)
        for _ in range(3):
            sock.sendall(HEAD + b"\r\n")
            received = b""
            while not received.endswith(b'{"ok":true}'):
                received += sock.recv(65536)
            assert received.startswith(b"HTTP/1.1 200 OK")
    big = {"type": "email", "payload": {"text": "x" * 60_000}}
    assert httpx.post(server.url + "/createJob", json=big, timeout=30).status_code == 201
    with connect(server) as sock:  # a body far past the head limit, in one write with its head
        body = json.dumps(big).encode()
        sock.sendall(
            b"POST /createJob HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        assert answer(sock).startswith(b"HTTP/1.1 201 ")
    if shutil.which("curl"):
        seed = {"type": "email", "payload": {"email": "user@example.com"}, "idempotency_key": "k"}
        curl = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"]
        curl += [f"{server.url}/createJob", "-H", "Content-Type: application/json"]
        sent = subprocess.run([*curl, "-d", json.dumps(seed)], capture_output=True, text=True)
        assert sent.stdout == "201"
    with connect(server) as sock:  # gone in the middle of its body
        sock.sendall(
            b"POST /createJob HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"type":'
        )
        time.sleep(0.5)
    assert healthy(server)
    log = server.root / "serve.log"
    wait_until(lambda: "closed before" in log.read_text(), timeout=15, what="the log line")
    assert "Traceback" not in log.read_text()
    assert [line for line in log.read_text().splitlines() if "closed before" in line] == [
        "WARNING:  127.0.0.1: connection closed before all of POST /createJob arrived"
    ]


# The hooks the limits rely on: a uvicorn that renames or drops one breaks them silently.
OVERRIDDEN = (
    "connection_made",
    "connection_lost",
    "data_received",
    "on_message_begin",
    "on_url",
    "on_header",
    "on_headers_complete",
    "on_message_complete",
    "on_response_complete",
    "pause_writing",
    "resume_writing",
    "_start_asgi_task",
)
CALLED = ("_unset_keepalive_if_required", "_unsupported_upgrade_warning", "send_400_response")


def test_the_uvicorn_hooks_the_limits_override_still_exist() -> None:
    for name in OVERRIDDEN + CALLED:
        assert callable(getattr(HttpToolsProtocol, name, None)), name
    assert all(name in vars(LimitedProtocol) for name in OVERRIDDEN)


class Held:
    def __init__(self, since: float, busy: bool = False) -> None:
        self.idle_since = since
        self.busy = busy
        self.evicted = False

    @property
    def evictable(self) -> bool:
        return not self.busy and not self.evicted

    def evict(self) -> None:
        self.evicted = True


def test_at_a_limit_the_longest_idle_connection_makes_room_and_busy_ones_are_kept() -> None:
    held = Connections(total=3, per_client=2)
    old, new, busy = Held(1.0), Held(2.0), Held(0.0, busy=True)
    assert held.admit(old, "a") and held.admit(new, "a")
    third = Held(3.0)
    assert held.admit(third, "a")  # past a's allowance: a's longest idle one goes
    assert old.evicted and not new.evicted and held.count("a") == 2
    assert held.admit(busy, "b") and len(held) == 3
    fourth = Held(4.0)
    assert held.admit(fourth, "b")  # past the total: the longest idle of all goes
    assert new.evicted and not busy.evicted and len(held) == 3
    full = Connections(total=1, per_client=1)
    working = Held(0.0, busy=True)
    assert full.admit(working, "a")
    assert not full.admit(Held(1.0), "a")  # nothing idle to close: the new one is refused
    full.release(working)
    full.release(working)  # twice is harmless
    assert len(full) == 0 and full.admit(Held(2.0), "a")
