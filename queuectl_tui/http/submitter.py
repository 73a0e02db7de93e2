"""Group commit: submissions that arrive together share one durable transaction.

Requests hand their validated jobs to committer threads, each with a store of its own. A
committer takes the first waiting submission and whatever else is waiting behind it (the
submissions that arrived while the commit before ran), up to a batch, and commits them all at
once, so the rate is bound by one fsync per batch, not per request. Each request is answered
only after the transaction holding its job is durable. Two committers share the submissions:
while one waits for the disk to sync its commit, the other commits the next batch.

A request never waits forever: if no committer is alive (its store could not be opened, or
the server is stopping) it is refused at once, and any wait is bounded. A request whose wait
runs out before a committer took its job withdraws it, so "not taken" is true for good: a
blind retry never makes a second job. One already being committed waits for that commit."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from dataclasses import dataclass

from .. import service
from ..config import Settings
from ..models import JobSpec, Operator
from ..store import Store, StoreError, SubmitResult

MAX_BATCH = 500
COMMITTERS = 2
ANSWER_WITHIN_SECONDS = 60.0  # far beyond any commit; a request past it gets 503
CONFIRM_WITHIN_SECONDS = 60.0  # then, for one a committer holds, the wait for its commit


class SubmitterDown(StoreError):
    """No committer can take the submission: nothing was stored."""


@dataclass(slots=True)
class _Waiting:
    spec: JobSpec
    who: Operator  # the audit trail's submitter
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[SubmitResult]
    # Set under the submitter's lock: by a committer that took it into a batch, or by the
    # request that withdrew it; whichever comes first decides.
    taken: bool = False
    withdrawn: bool = False


class Submitter:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._inbox: queue.SimpleQueue[_Waiting | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._alive = 0
        self._lock = threading.Lock()
        self._why_down = "the server is not accepting submissions"
        self.answer_within = ANSWER_WITHIN_SECONDS
        self.confirm_within = CONFIRM_WITHIN_SECONDS

    def start(self) -> None:
        with self._lock:
            self._alive = COMMITTERS
        for number in range(COMMITTERS):
            name = f"queuectl-submit-{number + 1}"
            thread = threading.Thread(target=self._serve, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        for _ in self._threads:
            self._inbox.put(None)  # one each: a committer takes one and ends
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads.clear()

    async def submit(self, spec: JobSpec, who: Operator) -> SubmitResult:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SubmitResult] = loop.create_future()
        waiting = _Waiting(spec, who, loop, future)
        with self._lock:
            if not self._alive:
                raise SubmitterDown(self._why_down)
            self._inbox.put(waiting)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.answer_within)
        except TimeoutError:
            with self._lock:
                waiting.withdrawn = not waiting.taken
            if waiting.withdrawn:
                raise SubmitterDown("the database did not take the submission in time") from None
        except asyncio.CancelledError:  # the client went away: nobody reads the answer
            future.cancel()
            raise
        # A committer holds it: its commit answers (and store timeouts bound the commit).
        try:
            return await asyncio.wait_for(future, self.confirm_within)
        except TimeoutError:
            raise SubmitterDown(
                "the database has not confirmed the submission: it may be stored; send it "
                "again with the same idempotency key, or look it up before sending it again"
            ) from None

    def _serve(self) -> None:
        store: Store | None = None
        try:
            store = service.open_queue(self._settings)
            while self._take(store):
                pass
        except BaseException as error:  # the store would not open, or a bug: say so below
            self._why_down = f"submissions cannot be stored: {error}"
        finally:
            if store is not None:
                store.close()
            self._retire()

    def _take(self, store: Store) -> bool:
        """Commit the next batch; False once told to stop."""
        first = self._inbox.get()
        if first is None:
            return False
        batch, stopping = self._collect(first)
        if batch:
            self._commit(store, batch)
        return not stopping

    def _retire(self) -> None:
        """This committer ends; the last one out refuses whatever is still waiting."""
        with self._lock:
            self._alive -= 1
            if self._alive:
                return
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                _settle(item, None, SubmitterDown(self._why_down))

    def _collect(self, first: _Waiting) -> tuple[list[_Waiting], bool]:
        """The next batch (withdrawn submissions left out, the rest marked taken), and
        whether this committer was told to stop."""
        found = [first]
        stopping = False
        while len(found) < MAX_BATCH:
            try:
                more = self._inbox.get_nowait()
            except queue.Empty:
                break
            if more is None:
                stopping = True
                break
            found.append(more)
        with self._lock:
            batch = [item for item in found if not item.withdrawn]
            for item in batch:
                item.taken = True
        return batch, stopping

    def _commit(self, store: Store, batch: list[_Waiting]) -> None:
        try:
            specs, submitters = [item.spec for item in batch], [item.who for item in batch]
            results = service.submit(store, self._settings, specs, submitters)
        except Exception as error:  # the whole transaction failed: every request hears why
            for item in batch:
                _settle(item, None, error)
            return
        for item, result in zip(batch, results, strict=True):
            _settle(item, result, None)


def _settle(item: _Waiting, result: SubmitResult | None, error: Exception | None) -> None:
    """Answer one request on its event loop (which may have closed: the server stopped)."""

    def answer() -> None:
        if item.future.done():  # the client went away, or its wait ran out
            return
        if error is not None:
            item.future.set_exception(error)
        elif result is not None:
            item.future.set_result(result)

    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for the answer
        item.loop.call_soon_threadsafe(answer)
