"""Cancellation: a flag that ends a recipe's waits at once, without polling.

Set from any thread (``Lock.cancel()``, a LeaderSelector's ``close()``), it
sets the events the waits sleep on (a watch's, the ride-out back-off's), so
a waiter gives up at once and deletes what it made.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from zk_recipes._types import Wakeable


class Cancellation:
    """A flag that ends a queued wait at once: ``acquire`` then returns None.

    Like ``client.wake_on_close``, it sets the event a wait sleeps on, so a
    waiter gives up without polling (and keeps its place until it does).
    With a ``parent``, it is also set while the parent is (a recipe's
    permanent "closed" flag under a per-call ``cancel()``).
    """

    def __init__(self, parent: Cancellation | None = None) -> None:
        self._guard = threading.Lock()
        self._set = False
        self._events: set[Wakeable] = set()
        self.parent = parent

    def set(self) -> None:
        with self._guard:
            self._set = True
            events = list(self._events)
        for event in events:
            event.set()

    def is_set(self) -> bool:
        return self._set or (self.parent is not None and self.parent.is_set())

    @contextlib.contextmanager
    def wakes(self, event: Wakeable) -> Iterator[None]:
        """Set ``event`` if this (or its parent) is, or becomes, set while the block runs."""
        with contextlib.ExitStack() as stack:
            if self.parent is not None:
                stack.enter_context(self.parent.wakes(event))
            with self._guard:
                if self._set:
                    event.set()
                else:
                    self._events.add(event)
            try:
                yield
            finally:
                with self._guard:
                    self._events.discard(event)
