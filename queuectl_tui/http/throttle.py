"""Slowing down token guesses: the requests that carry a token from one client address are
checked one at a time, and each failure holds that address's turn for a delay that doubles
with its recent failures. Parallel guesses therefore gain nothing (a right guess waits behind
the wrong ones queued before it), and the wait is an asyncio sleep, so the server goes on
answering everyone else meanwhile. Bounded: few requests may wait per address and overall
(more get 429 without their token being looked at), and few addresses are remembered."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

BASE_DELAY_S = 0.1  # the first failure from an address
MAX_DELAY_S = 2.0  # from the sixth recent failure on: half a guess per second
WINDOW_S = 300.0  # failures older than this are forgotten
# Few, so that a request waits at most some 8 s for its turn: a queue of failures also holds
# up a graceful stop, which lets requests in flight finish.
MAX_WAITING_PER_CLIENT = 4
MAX_WAITING = 512
MAX_CLIENTS = 4096


class Busy(Exception):
    """Too many requests with a token wait already; this one was not checked."""


def client_key(address: str) -> str:
    """An IPv4 address as it is; an IPv6 one by its /64, which one host usually holds whole."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class _Client:
    __slots__ = ("failures", "lock", "waiting")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.failures: deque[float] = deque(maxlen=64)
        self.waiting = 0


class FailureThrottle:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._clients: OrderedDict[str, _Client] = OrderedDict()
        self._waiting = 0

    def delay(self, recent_failures: int) -> float:
        return float(min(MAX_DELAY_S, BASE_DELAY_S * 2.0 ** max(0, recent_failures - 1)))

    async def check(self, address: str, verify: Callable[[], T | None]) -> tuple[T | None, int]:
        """`verify()` in this address's turn: its result, and when it is None (a failure),
        how many failures the address has had recently, this one included, after waiting
        out the delay. Busy when too many wait already."""
        key = client_key(address)
        client = self._client(key)
        if client.waiting >= MAX_WAITING_PER_CLIENT or self._waiting >= MAX_WAITING:
            raise Busy
        client.waiting += 1
        self._waiting += 1
        try:
            async with client.lock:
                found = verify()
                if found is not None:
                    return found, 0
                now = self._clock()
                while client.failures and client.failures[0] < now - WINDOW_S:
                    client.failures.popleft()
                client.failures.append(now)
                count = len(client.failures)
                await asyncio.sleep(self.delay(count))
                return None, count
        finally:
            client.waiting -= 1
            self._waiting -= 1

    def _client(self, key: str) -> _Client:
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = _Client()
            while len(self._clients) > MAX_CLIENTS:
                self._clients.popitem(last=False)  # the one longest without a token request
        self._clients.move_to_end(key)
        return client
