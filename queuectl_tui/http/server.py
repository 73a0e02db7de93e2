"""Serving the application under uvicorn on an address the CLI was given."""

from __future__ import annotations

import logging
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import FrameType

from ..config import ConfigError, Settings, parse_hosts
from ..errors import InvalidInput
from ..http_token import TokenFileError, ensure_token, generated_token, token_file
from .auth import bind_refusal, is_loopback, weak_token_refusal
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


WILDCARDS = frozenset({"0.0.0.0", "::"})


def access(settings: Settings, address: Address, options: ServeOptions) -> ServeOptions:
    """The start-up checks of who may reach the server, and the options they give: refused
    (ServeError) off loopback without tokens and with a weak token; the generated token
    when none is configured (made on the first start); the host names it answers for."""
    refusal = bind_refusal(address.host, settings.tokens) or weak_token_refusal(settings.tokens)
    if refusal:
        raise ServeError(refusal)
    if not settings.tokens and not options.read_only:
        where = token_file(settings.database)
        try:
            secret, _ = ensure_token(where)
        except TokenFileError as error:
            raise ServeError(str(error)) from None
        options = replace(options, generated=generated_token(secret, where.path))
    return replace(options, hosts=allowed_hosts(settings, address))


def allowed_hosts(settings: Settings, address: Address) -> frozenset[str] | None:
    """The host names requests may address (None: any). On loopback, only this machine's
    loopback names reach the server. Elsewhere `http-hosts`, by default the address it
    listens on and this machine's name and FQDN (and the loopback names, for a server on
    every address): what clients that reach it normally type, and never a name of
    someone else's pointed at it."""
    host = address.host.lower()
    if is_loopback(host):
        return LOOPBACK_NAMES | {host}
    if settings.http_hosts:
        try:
            return parse_hosts(settings.http_hosts)
        except ConfigError as error:
            raise ServeError(str(error)) from None
    names = {socket.gethostname().lower(), socket.getfqdn().lower()} - LOOPBACK_NAMES
    names |= LOOPBACK_NAMES if host in WILDCARDS else {host}  # getfqdn may say 'localhost'

    return frozenset(name for name in names if name)


def _log_to_stderr() -> None:
    """The server's own log lines (failed authentications) on stderr, one line each."""
    logger = logging.getLogger("queuectl.http")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def serve(
    settings: Settings,
    address: Address,
    options: ServeOptions,
    listening: Callable[[ServeOptions], None] = lambda options: None,
) -> None:
    """Serve until SIGINT or SIGTERM (requests in flight are finished); `listening` is called
    once the address is bound, with the options `access` made."""
    options = access(settings, address, options)
    _log_to_stderr()
    import uvicorn

    from .app import create_app
    from .transport import protocol_class

    sock = _listen(address)
    listening(options)
    # uvicorn stops gracefully on SIGINT and SIGTERM, then raises the signal again; this
    # handler receives it then and ends the process with status 0 (a stop asked for).
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, _stopped)
    app = create_app(settings, options)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        server_header=False,
        proxy_headers=False,  # X-Forwarded-For from a local client must not name the client
        lifespan="on",
        http=protocol_class(settings),  # httptools, with the limits a hostile client meets
        ws="none",
    )
    stopping = app.state.queuectl.stopping

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            stopping.set()  # open output streams end, and the graceful stop can finish
            super().handle_exit(sig, frame)

    Server(config).run(sockets=[sock])
