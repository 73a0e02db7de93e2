"""A TCP proxy between pools and PostgreSQL that can lose the answer to a commit on purpose,
and play an outage.

It forwards everything. Armed with a marker, it watches the connection the marker shows up
on (in what the client sends, or in what the server answers) and, once the server has sent
the ReadyForQuery that ends the transaction (status idle: committed, or never opened), it
forwards that message and then cuts both sides: the server has committed, the client never
learns it. New connections go through as before. Or, armed to partition, it holds that
answer and stops every link where it is (new ones too) until `heal()`, as a network partition
does: then the answer arrives, late. `outage()` refuses new connections and cuts the open ones
until `restore()`.

The server's messages are parsed from the start of each connection (SSL and GSS encryption
are turned off in the URL the pool gets, so the stream is plain): a type byte and a length,
after the single-byte answers the server gives to an SSL or GSS request."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from urllib.parse import urlsplit, urlunsplit


class PgProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._in_request = False
        self._open: set[_Link] = set()
        self._down = False
        self.cuts = 0  # answers lost so far
        self.connections = 0  # accepted and forwarded
        self._closed = False
        self._partition_on_marker = False  # armed to partition rather than cut
        self._flowing = threading.Event()  # cleared while partitioned: nothing moves
        self._flowing.set()
        self.partitions = 0
        threading.Thread(target=self._accept, name="pg-proxy", daemon=True).start()

    def url(self, location: str) -> str:
        """`location` (a postgresql:// URL) through this proxy, in plain text."""
        parts = urlsplit(location)
        netloc = parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{self.port}"
        netloc_text = f"{netloc[0]}@{host}" if len(netloc) == 2 else host
        query = "&".join(q for q in (parts.query, "sslmode=disable&gssencmode=disable") if q)
        return urlunsplit(parts._replace(netloc=netloc_text, query=query))

    # -- control
    def arm(self, marker: bytes, in_request: bool, partition: bool = False) -> None:
        """Lose the answer to the next transaction that `marker` shows up in (in what the
        client sends if `in_request`, else in what the server answers). With `partition`,
        hold it instead and partition every link at that moment, until `heal()`: then the
        answer arrives, late."""
        with self._lock:
            self._marker, self._in_request = marker, in_request
            self._partition_on_marker = partition

    def partition(self) -> None:
        """Nothing moves on any link, new ones included (they are accepted), until `heal()`."""
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    @property
    def armed(self) -> bool:
        return self._marker is not None

    def outage(self) -> None:
        """The server is gone: open connections are cut, new ones refused."""
        with self._lock:
            self._down = True
            links = list(self._open)
        for link in links:
            link.cut()

    def restore(self) -> None:
        with self._lock:
            self._down = False

    def close(self) -> None:
        self._closed = True
        self._flowing.set()
        self.outage()
        with contextlib.suppress(OSError):
            self._listener.close()

    # -- the links
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                down = self._down
            if down:
                client.close()  # refused, as by a server that is not there
                continue
            try:
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            link = _Link(self, client, server)
            with self._lock:
                self._open.add(link)
                self.connections += 1
            link.start()

    def _forget(self, link: _Link) -> None:
        with self._lock:
            self._open.discard(link)

    def _take_partition(self) -> bool:
        """If armed to partition: partition now (every link stops) and say so."""
        with self._lock:
            if not self._partition_on_marker:
                return False
            self._partition_on_marker = False
            self.partitions += 1
            self._flowing.clear()
            return True

    def _take_marker(self, seen: bytes, in_request: bool) -> bool:
        """Whether `seen` carries the armed marker (disarming it if so)."""
        with self._lock:
            if self._marker is None or self._in_request != in_request:
                return False
            if self._marker not in seen:
                return False
            self._marker = None
            return True


class _Link:
    """One client connection and its connection to the server."""

    def __init__(self, proxy: PgProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self._doomed = False  # cut after the next ReadyForQuery with status idle
        self._gone = False
        self._tail = b""  # the end of the last chunk, so a marker split in two is found

    def start(self) -> None:
        threading.Thread(target=self._upstream, daemon=True).start()
        threading.Thread(target=self._downstream, daemon=True).start()

    def cut(self) -> None:
        if self._gone:
            return
        self._gone = True
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        self.proxy._forget(self)

    def _upstream(self) -> None:
        """Client to server, as it comes; a marker in it dooms the transaction."""
        try:
            while True:
                chunk = self.client.recv(65536)
                if not chunk:
                    break
                seen, self._tail = self._tail + chunk, chunk[-256:]
                if self.proxy._take_marker(seen, in_request=True):
                    self._doomed = True
                self.proxy._flowing.wait()
                self.server.sendall(chunk)
        except OSError:
            pass
        self.cut()

    def _downstream(self) -> None:
        """Server to client, one message at a time. An answer is held until its
        ReadyForQuery (so a lost one reaches the client not even in part); notifications
        and COPY, which no ReadyForQuery follows at once, go through as they come."""
        buffer = b""
        started = False  # past the single-byte answers to SSL/GSS requests
        held = bytearray()  # this answer's messages so far
        try:
            while True:
                chunk = self.server.recv(65536)
                if not chunk:
                    break
                buffer += chunk
                while buffer:
                    if not started and buffer[:1] == b"N":
                        held += buffer[:1]  # "no SSL/GSS, go on in plain text"
                        buffer = buffer[1:]
                        self.client.sendall(bytes(held))
                        held.clear()
                        continue
                    started = True
                    if len(buffer) < 5:
                        break
                    length = struct.unpack("!I", buffer[1:5])[0]
                    if len(buffer) < 1 + length:
                        break
                    message, buffer = buffer[: 1 + length], buffer[1 + length :]
                    held += message
                    kind = message[:1]
                    if kind in _AT_ONCE:
                        self.proxy._flowing.wait()
                        self.client.sendall(bytes(held))
                        held.clear()
                        continue
                    if kind != b"Z":
                        continue
                    if self.proxy._take_marker(bytes(held), in_request=False):
                        self._doomed = True
                    if self._doomed and message[5:6] == b"I":
                        self._doomed = False
                        if self.proxy._take_partition():
                            # Committed; the answer waits for the partition to heal.
                            self.proxy._flowing.wait()
                            self.client.sendall(bytes(held))
                            held.clear()
                            continue
                        # Committed (or outside a transaction): the answer goes no further.
                        with self.proxy._lock:
                            self.proxy.cuts += 1
                        self.cut()
                        return
                    self.proxy._flowing.wait()
                    self.client.sendall(bytes(held))
                    held.clear()
        except OSError:
            pass
        self.cut()


# Server messages that no ReadyForQuery follows at once: notifications, notices, parameter
# changes, authentication requests and COPY.
_AT_ONCE = frozenset({b"A", b"N", b"S", b"R", b"G", b"H", b"W", b"d", b"c"})
