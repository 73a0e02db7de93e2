"""Group commit: submissions that arrive together share one durable transaction.

Requests hand their validated jobs to one thread with a store of its own. It takes the first
waiting submission, collects whatever else arrives within a short window (or until a batch is
full), and commits them all at once, so the rate is bound by one fsync per batch, not per
request. Each request is answered only after the transaction holding its job is durable."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from dataclasses import dataclass

from .. import service
from ..config import Settings
from ..models import JobSpec
from ..store import Store, SubmitResult

WINDOW_SECONDS = 0.001  # how long a batch waits for company after its first submission
MAX_BATCH = 500


@dataclass(slots=True)
class _Waiting:
    spec: JobSpec
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[SubmitResult]


class Submitter:
    def __init__(self, settings: Settings, window: float = WINDOW_SECONDS) -> None:
        self._settings = settings
        self._window = window
        self._inbox: queue.SimpleQueue[_Waiting | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.batches = 0  # transactions committed: how well submissions were grouped

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="queuectl-submit", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._inbox.put(None)
            self._thread.join(timeout=30)
            self._thread = None

    async def submit(self, spec: JobSpec) -> SubmitResult:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SubmitResult] = loop.create_future()
        self._inbox.put(_Waiting(spec, loop, future))
        return await future

    def _serve(self) -> None:
        store = service.open_queue(self._settings)
        try:
            while True:
                first = self._inbox.get()
                if first is None:
                    return
                batch, stopping = self._collect(first)
                self._commit(store, batch)
                if stopping:
                    return
        finally:
            store.close()

    def _collect(self, first: _Waiting) -> tuple[list[_Waiting], bool]:
        batch = [first]
        deadline = time.monotonic() + self._window
        while len(batch) < MAX_BATCH:
            try:
                more = self._inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if more is None:
                return batch, True
            batch.append(more)
        return batch, False

    def _commit(self, store: Store, batch: list[_Waiting]) -> None:
        try:
            results = service.submit(store, self._settings, [item.spec for item in batch])
        except Exception as error:  # the whole transaction failed: every request hears why
            for item in batch:
                item.loop.call_soon_threadsafe(_fail, item.future, error)
            return
        self.batches += 1
        for item, result in zip(batch, results, strict=True):
            item.loop.call_soon_threadsafe(_answer, item.future, result)


def _answer(future: asyncio.Future[SubmitResult], result: SubmitResult) -> None:
    if not future.done():  # the client may have gone away
        future.set_result(result)


def _fail(future: asyncio.Future[SubmitResult], error: Exception) -> None:
    if not future.done():
        future.set_exception(error)
