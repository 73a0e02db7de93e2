"""The HTTP face under load: durable submissions per second and their latency with 1 and 8
concurrent clients, next to the CLI's single enqueue and the store's own insert, in one run.

The clients are asyncio streams in this process speaking keep-alive HTTP/1.1 with prepared
requests, so that the load costs little beside the server it measures; the server is a real
`queuectl serve` process on a free loopback port."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

from ..models import JobSpec
from ..store import open_store
from ..timeutil import now_ms
from .places import Places
from .scenarios import Measure, _queuectl

_BODY = json.dumps({"type": "email", "payload": {"email": "user@example.com"}}).encode()


@dataclass(frozen=True, slots=True)
class Load:
    rate: float  # submissions per second
    p50_ms: float
    p95_ms: float


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Server:
    def __init__(self, places: Places) -> None:
        config = places.folder / "http-config.json"
        config.write_text(json.dumps({"job_types": {"email": {"command": "cat"}}}))
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "queuectl_tui", "--config", str(config)),
                *("--db", places.location("http"), "serve", "--addr", f"127.0.0.1:{self.port}"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if not k.startswith("QUEUECTL_")},
        )
        deadline = time.monotonic() + 30
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("queuectl serve did not start")
            time.sleep(0.05)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                host = f"127.0.0.1:{self.port}".encode()
                sock.sendall(
                    b"GET /healthz HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n"
                )
                return sock.recv(64).startswith(b"HTTP/1.1 200")
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


async def _client(port: int, count: int, latencies: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = (
        b"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1:" + str(port).encode() + b"\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: " + str(len(_BODY)).encode() + b"\r\n\r\n" + _BODY
    )
    try:
        for _ in range(count):
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 201"):
                raise RuntimeError(f"a submission was answered {head.splitlines()[0]!r}")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            latencies.append((time.perf_counter() - started) * 1000)
    finally:
        writer.close()


async def _load(port: int, clients: int, per_client: int) -> Load:
    latencies: list[float] = []
    started = time.perf_counter()
    await asyncio.gather(*(_client(port, per_client, latencies) for _ in range(clients)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return Load(
        len(latencies) / elapsed,
        latencies[len(latencies) // 2],
        latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))],
    )


def _store_insert_rate(database: str, jobs: int) -> float:
    """Durable single-job inserts per second through the store, in this process."""
    with open_store(database) as store:
        started = time.perf_counter()
        for index in range(jobs):
            store.enqueue(JobSpec(f"raw-{now_ms()}-{index}", "true"), 3, store.now())
        return jobs / (time.perf_counter() - started)


def _spread(values: list[float]) -> str:
    return f"{min(values):,.0f}-{max(values):,.0f}"


def http_submissions(places: Places, per_client: int, rounds: int) -> list[Measure]:
    """Rounds alternate the 1-client load, the 8-client load and the store's own insert, so
    that a noisy moment of the machine touches each; medians are reported, ranges beside."""
    server = _Server(places)
    raw_queue = places.location("raw")
    single: list[Load] = []
    eight: list[Load] = []
    raw: list[float] = []
    try:
        for _ in range(rounds):
            single.append(asyncio.run(_load(server.port, 1, per_client)))
            eight.append(asyncio.run(_load(server.port, 8, per_client)))
            raw.append(_store_insert_rate(raw_queue, per_client))
    finally:
        server.stop()
    cli_queue = places.location("enqueue")
    cli_ms = [_queuectl(cli_queue, "enqueue", '{"command":"true"}') * 1000 for _ in range(5)]
    measures = []
    for clients, loads in ((1, single), (8, eight)):
        rates = [load.rate for load in loads]
        measures.append(
            Measure(
                f"HTTP submissions, {clients} client{'s' if clients > 1 else ''}",
                statistics.median(rates),
                "jobs/s",
                baseline=statistics.median(raw),
                target=">= 2,000 jobs/s" if clients == 8 else "",
                details={
                    "range": _spread(rates),
                    "p50_ms": round(statistics.median(load.p50_ms for load in loads), 2),
                    "p95_ms": round(statistics.median(load.p95_ms for load in loads), 2),
                    "rounds": rounds,
                },
            )
        )
    measures.append(
        Measure(
            "store's durable insert, one job each",
            statistics.median(raw),
            "jobs/s",
            details={"range": _spread(raw)},
        )
    )
    measures.append(Measure("queuectl enqueue, a process per job", statistics.median(cli_ms), "ms"))
    return measures
