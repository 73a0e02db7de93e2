"""Who holds the server's connections: at most so many in all and so many per client address.

At a limit the connection that has waited longest on its client (idle, still sending its
request, leaving its answer unread) is closed to make room, so that sockets left open by one
client cannot lock the others out; only when every connection is being answered is the new
one refused."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class Connection(Protocol):
    @property
    def evictable(self) -> bool:
        """True unless a request it sent in full is being answered."""
        ...

    @property
    def idle_since(self) -> float:
        """When it last became idle (loop time)."""
        ...

    def evict(self) -> None:
        """Close it at once, to make room."""
        ...


class Connections:
    def __init__(self, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        self._peers: dict[Connection, str] = {}
        self._by_peer: dict[str, set[Connection]] = {}

    def __len__(self) -> int:
        return len(self._peers)

    def count(self, peer: str) -> int:
        return len(self._by_peer.get(peer, ()))

    def admit(self, connection: Connection, peer: str) -> bool:
        """Count `connection` in, making room if a limit is reached; False: refuse it."""
        mine = self._by_peer.get(peer, set())
        if len(mine) >= self.per_client and not self._evict(mine):
            return False
        if len(self._peers) >= self.total and not self._evict(self._peers):
            return False
        self._peers[connection] = peer
        self._by_peer.setdefault(peer, set()).add(connection)
        return True

    def release(self, connection: Connection) -> None:
        """Count it out (again is harmless)."""
        peer = self._peers.pop(connection, None)
        if peer is None:
            return
        mine = self._by_peer[peer]
        mine.discard(connection)
        if not mine:
            del self._by_peer[peer]

    def _evict(self, group: Iterable[Connection]) -> bool:
        idle = [connection for connection in group if connection.evictable]
        if not idle:
            return False
        victim = min(idle, key=lambda connection: connection.idle_since)
        self.release(victim)
        victim.evict()
        return True
