"""uvicorn's httptools protocol with the limits a hostile client meets: a bounded request head
(bytes and headers), a deadline for the head, for the body and for idleness (one timer per
connection), and bounded connections in all and per client address (connections.py).

The override hooks the parser callbacks and connection events uvicorn's HttpToolsProtocol
already has; tests/test_http_attacks.py notices a uvicorn that no longer calls them."""

from __future__ import annotations

import asyncio
import http
import json
import logging
import resource
from asyncio import TimerHandle
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

import httptools
from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from ..config import Settings
from .busy import WAITING
from .connections import Connections

log = logging.getLogger("uvicorn.error")

# Descriptors kept for what is not a connection: the database files of each store thread,
# the log, the committers, the loop's own.
RESERVED_FDS = 256
LINGER_S = 2.0  # after a refusal, the rest the client sends is read and dropped this long


@dataclass(frozen=True, slots=True)
class TransportLimits:
    header_bytes: int
    header_count: int
    header_timeout: float
    body_timeout: float
    idle_timeout: float
    connections: int
    client_connections: int

    @classmethod
    def from_settings(cls, settings: Settings) -> TransportLimits:
        return cls(
            settings.http_header_limit,
            settings.http_header_count,
            settings.http_header_timeout,
            settings.http_body_timeout,
            settings.http_idle_timeout,
            min(settings.http_max_connections, _descriptor_room()),
            settings.http_max_client_connections,
        )


def _descriptor_room() -> int:
    """Connections the process can hold past its other files: the soft descriptor limit is
    raised to the hard one, and the limit on connections kept below it, so that `accept`
    never fails for want of a descriptor (which would lock every client out)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    return max(16, soft - RESERVED_FDS)


class Phase(Enum):
    IDLE = "idle"  # between requests, or before the first
    HEAD = "head"  # the request line and headers are arriving
    BODY = "body"  # the body is arriving (the application may run already)
    ANSWER = "answer"  # the request is in; the application answers
    REFUSED = "refused"  # answered with a refusal; closing


class HeadRefused(Exception):
    """Raised in a parser callback to stop parsing a request head past its limits."""


class LimitedProtocol(HttpToolsProtocol):
    """Set `limits` and `connections` on a subclass (see `protocol_class`)."""

    limits: ClassVar[TransportLimits]
    connections_held: ClassVar[Connections]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.phase = Phase.IDLE
        self.idle_since = self.loop.time()
        self._admitted = False
        self._deadline: TimerHandle | None = None
        self._phase_due: float | None = None  # the deadline of the phase, loop time
        self._write_stalled = False
        self._head_bytes = 0  # raw bytes of the head so far
        self._head_partial = False  # the head began inside the last chunk read
        self._parsed_bytes = 0
        self._header_total = 0
        self._refusal: str | None = None
        self._body_done = True
        self._running: RequestResponseCycle | None = None

    # Connections in and out

    # uvicorn's protocol narrows BaseProtocol's BaseTransport to Transport, as this does.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = self.client[0] if self.client else ""
        if not self.connections_held.admit(self, peer):
            log.info("%s: too many connections; refused", peer)
            self.transport.abort()
            return
        self._admitted = True
        self._enter(Phase.IDLE, self.limits.idle_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections_held.release(self)
        self._cancel()
        super().connection_lost(exc)

    @property
    def evictable(self) -> bool:
        """Not while a request it sent in full is being answered, unless the client leaves
        the answer unread or the request waits for a turn (busy.py)."""
        if self.phase is not Phase.ANSWER or self._write_stalled:
            return True
        return self._running is not None and bool(self._running.scope.get(WAITING))

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        self._running = cycle  # uvicorn's `cycle` is the last one read, maybe not yet started
        super()._start_asgi_task(cycle, app)

    def evict(self) -> None:
        self._close("closed to make room for a new connection")

    # Reading

    def data_received(self, data: bytes) -> None:
        if self.phase is Phase.REFUSED or self.parser is None:
            return  # the rest of a refused request is dropped unread
        if self.phase is Phase.IDLE:
            self._start_head(partial=False)
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self._refusal is not None:
                self._refuse(431, self._refusal)
                return
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()  # no upgrade is served (ws="none")
        if self.phase is Phase.HEAD:
            # The whole chunk is head unless the head began inside it (after a body).
            if not self._head_partial:
                self._head_bytes += len(data)
            self._head_partial = False
            if self._head_bytes > self.limits.header_bytes:
                self._refuse(431, self._too_large())

    def _start_head(self, partial: bool) -> None:
        self._head_bytes = self._parsed_bytes = self._header_total = 0
        self._head_partial = partial
        self._refusal = None
        self._enter(Phase.HEAD, self.limits.header_timeout)

    def _too_large(self) -> str:
        return f"the request line and headers are larger than {self.limits.header_bytes:,} bytes"

    def on_message_begin(self) -> None:
        if self.phase is not Phase.HEAD:  # a pipelined request, after a body in one chunk
            self._start_head(partial=True)
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._parsed_bytes += len(url)
        if self._parsed_bytes > self.limits.header_bytes:
            self._refusal = self._too_large()
            raise HeadRefused
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._parsed_bytes += len(name) + len(value) + 4
        self._header_total += 1
        if self._header_total > self.limits.header_count:
            self._refusal = f"a request may have at most {self.limits.header_count} headers"
            raise HeadRefused
        if self._parsed_bytes > self.limits.header_bytes:
            self._refusal = self._too_large()
            raise HeadRefused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._body_done = False
        self._enter(Phase.BODY, self.limits.body_timeout)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._body_done = True
        if self.phase is Phase.BODY:
            if self.cycle is not None and self.cycle.response_complete:
                self._become_idle()
            else:
                self._enter(Phase.ANSWER, None)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._unset_keepalive_if_required()  # the idle deadline below replaces uvicorn's
        if self.transport.is_closing():
            return
        if self._body_done and (self.cycle is None or self.cycle.response_complete):
            self._become_idle()

    def _become_idle(self) -> None:
        self.idle_since = self.loop.time()
        self._enter(Phase.IDLE, self.limits.idle_timeout)

    # Writing: a client that leaves its answer unread is idle too

    def pause_writing(self) -> None:
        super().pause_writing()
        self._write_stalled = True
        self._arm(self.loop.time() + self.limits.idle_timeout)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._write_stalled = False
        self._arm(self._phase_due)

    # Deadlines and closing

    def _enter(self, phase: Phase, seconds: float | None) -> None:
        self.phase = phase
        self._phase_due = None if seconds is None else self.loop.time() + seconds
        if not self._write_stalled:
            self._arm(self._phase_due)

    def _arm(self, due: float | None) -> None:
        self._cancel()
        if due is not None and self._admitted:
            self._deadline = self.loop.call_at(due, self._expired)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.phase is Phase.REFUSED:
            self.transport.abort()
        elif self._write_stalled:
            self._close("left its answer unread too long")
        else:
            self._close(f"too slow (no complete request {self.phase.value} in time)")

    def _close(self, why: str) -> None:
        peer = self.client[0] if self.client else "?"
        log.info("%s: %s; closed", peer, why)
        self._cancel()
        self.connections_held.release(self)
        if self.transport.get_write_buffer_size():
            self.transport.abort()  # close() would wait for a client that does not read
        else:
            self.transport.close()
        # What connection_lost will do, at once: an answer under way writes nothing more to
        # the closed transport, and one waiting to write stops waiting.
        if self._running is not None and not self._running.response_complete:
            self._running.disconnected = True
            self._running.message_event.set()
        self.flow.resume_writing()

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` with `message`, stop reading requests, close once it is sent (or
        after LINGER_S), so that the client sees the answer and not a reset."""
        log.info("%s: %s; refused", self.client[0] if self.client else "?", message)
        self.phase = Phase.REFUSED
        self.connections_held.release(self)
        body = json.dumps({"error": message, "field": None}).encode()
        phrase = http.HTTPStatus(status).phrase.encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, phrase, len(body), body)
        )
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._arm(self.loop.time() + LINGER_S)


def protocol_class(settings: Settings) -> type[LimitedProtocol]:
    """A protocol class for uvicorn's `Config(http=...)`, with this server's limits and a
    count of its connections."""
    limits = TransportLimits.from_settings(settings)
    attributes = {
        "limits": limits,
        "connections_held": Connections(limits.connections, limits.client_connections),
    }
    return type("ServerProtocol", (LimitedProtocol,), attributes)
