"""Serving the application under uvicorn on an address the CLI was given."""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import FrameType

from ..config import Settings
from ..errors import InvalidInput
from .auth import bind_refusal, is_loopback
from .context import ServeOptions
from .guard import LOOPBACK_NAMES

DEFAULT_ADDRESS = "127.0.0.1:8080"


class ServeError(Exception):
    """The server cannot start; the message says why in one sentence."""


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def parse_address(text: str) -> Address:
    """'127.0.0.1:8080', 'localhost:8080', '[::1]:8080' or ':8080' (loopback)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or "/" in host:
        raise InvalidInput(f"--addr must be HOST:PORT, such as {DEFAULT_ADDRESS}, not {text!r}")
    host = host.strip("[]") or "127.0.0.1"
    return Address(host, int(port))


def _listen(address: Address) -> socket.socket:
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    # IPPROTO_TCP by name: asyncio turns Nagle off only on sockets that say so, and with it
    # on, each response's body waited some 40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address.host, address.port))
        sock.listen(2048)
    except OSError as error:
        sock.close()
        reason = error.strerror or str(error)
        raise ServeError(f"cannot listen on {address.host}:{address.port}: {reason}") from None
    sock.set_inheritable(True)
    return sock


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def serve(
    settings: Settings,
    address: Address,
    options: ServeOptions,
    listening: Callable[[], None] = lambda: None,
) -> None:
    """Serve until SIGINT or SIGTERM (requests in flight are finished); `listening` is called
    once the address is bound."""
    refusal = bind_refusal(address.host, settings.tokens)
    if refusal:
        raise ServeError(refusal)
    import uvicorn

    from .app import create_app
    from .transport import protocol_class

    sock = _listen(address)
    listening()
    # uvicorn stops gracefully on SIGINT and SIGTERM, then raises the signal again; this
    # handler receives it then and ends the process with status 0 (a stop asked for).
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, _stopped)
    if is_loopback(address.host):  # only this machine's names reach a loopback server
        options = replace(options, hosts=LOOPBACK_NAMES | {address.host.lower()})
    config = uvicorn.Config(
        create_app(settings, options),
        log_level="warning",
        access_log=False,
        server_header=False,
        proxy_headers=False,  # X-Forwarded-For from a local client must not name the client
        lifespan="on",
        http=protocol_class(settings),  # httptools, with the limits a hostile client meets
        ws="none",
    )
    uvicorn.Server(config).run(sockets=[sock])
