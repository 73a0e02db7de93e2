"""Keys one at a time, in the order they were pressed, for the console.

Textual routes a key to the focused widget, which may pass it up through its ancestors (each
in its own message queue) before the app's bindings see it; a fast typist's next key can reach
a binding while the one before it is still on its way. An operator typing `/ text Enter r y`
must not have `r` act on rows the Enter has not shown yet. So a key is held while the one
before it is being handled, or while the rows it would act on are being read, and sent on
afterwards.

Everything the console relies on of Textual's key routing is in this one class, so that a new
Textual touches one file: `events.Key.is_forwarded` (set once a widget passed the key on),
`DOMNode.call_later` returning False on a node that no longer runs, a held key posted back to
the app to be routed again, and `App.on_event` as the one door keys come through."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from textual import events
from textual.app import App
from textual.dom import DOMNode

KEY_TIMEOUT = 1.0  # seconds: a key whose widget went away stops holding the keys after it
ROWS_WAIT = 10.0  # seconds a key that acts on rows waits for them, at most


class KeyOrder:
    """Routes each key once the keys before it have been handled.

    `route` is the app's own event handling (Textual's `App.on_event`); `target` says where a
    key goes (None: nowhere, it is dropped); `acts_on_rows` says whether a key acts on the
    rows of the view, and so waits while `hold_row_keys` is in force."""

    def __init__(
        self,
        app: App[Any],
        route: Callable[[events.Event], Awaitable[None]],
        target: Callable[[events.Key], DOMNode | None],
        acts_on_rows: Callable[[events.Key], bool],
    ) -> None:
        self._app = app
        self._route = route
        self._target = target
        self._acts_on_rows = acts_on_rows
        self._in_flight = 0  # the serial number of the key being followed; 0: none
        self._serial = 0
        self._held: list[events.Key] = []
        self._replayed: events.Key | None = None  # the held key sent on to be routed now
        self._rows_due_until = 0.0  # monotonic: a changed view's rows are being read till then

    async def on_event(self, event: events.Event) -> None:
        """The app's `on_event`: keys in order, every other event as Textual routes it."""
        if not isinstance(event, events.Key) or event.is_forwarded:
            await self._route(event)
            return
        if event is not self._replayed and (self.pending or self._waits_for_rows(event)):
            self._held.append(event)  # routed once the keys (or rows) before it are in
            return
        self._replayed = None
        await self._route_key(event)
        if not self._in_flight:
            self._replay_next()

    @property
    def pending(self) -> bool:
        """True while a key is being handled, or keys wait for the one before them."""
        return bool(self._in_flight or self._held or self._replayed is not None)

    @property
    def rows_due(self) -> bool:
        """Whether keys that act on rows are waiting for the rows of a changed view."""
        return bool(self._rows_due_until)

    def hold_row_keys(self) -> None:
        """Keys that act on rows wait until `rows_in` (at most ROWS_WAIT): the rows, or the
        marks, they would act on are being read."""
        self._rows_due_until = time.monotonic() + ROWS_WAIT
        self._app.set_timer(ROWS_WAIT, self._replay_next)  # they never came: go on

    def rows_in(self) -> None:
        """The rows of the view are shown (or will not come): the keys held for them go on."""
        self._rows_due_until = 0.0
        self._replay_next()

    async def _route_key(self, event: events.Key) -> None:
        target = self._target(event)
        if target is None:
            return
        await self._route(event)
        if event.is_forwarded:  # a widget's key (not an app binding): follow it to the end
            self._serial += 1
            self._in_flight = self._serial
            self._app.set_timer(KEY_TIMEOUT, partial(self._key_done, self._serial))
            self._follow_key(target.ancestors_with_self, self._serial)

    def _follow_key(self, path: list[DOMNode], key: int) -> None:
        # A widget's key bubbles up to the app one message queue at a time: a callback queued
        # behind it on each node in turn runs once every node has handled it.
        while path:
            node, path = path[0], path[1:]
            if node.call_later(self._follow_key, path, key):
                return
        self._key_done(key)

    def _key_done(self, key: int) -> None:
        if key != self._in_flight:
            return  # done already, or given up on after KEY_TIMEOUT
        self._in_flight = 0
        self._replay_next()

    def _waits_for_rows(self, event: events.Key) -> bool:
        if time.monotonic() >= self._rows_due_until:
            return False
        return self._acts_on_rows(event)

    def _replay_next(self) -> None:
        if self._held and self._replayed is None:
            if self._waits_for_rows(self._held[0]):
                return  # replayed when the rows are in
            self._replayed = self._held.pop(0)
            self._app.post_message(self._replayed)
