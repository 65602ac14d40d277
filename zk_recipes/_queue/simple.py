"""SimpleQueue: Curator's SimpleDistributedQueue, where no item is silently lost.

Znodes (Curator's layout, byte for byte): items ``<path>/qn-<seq10>``,
PERSISTENT_SEQUENTIAL, the item's bytes as the node's data, under CONTAINER
parents. A Curator ``SimpleDistributedQueue`` on the same path takes what we
offer and the reverse. ``offer`` also keeps one ephemeral marker per producer
under ``<path>-puts`` (``putting.py``): a lost reply puts the item once, not
twice (Curator's offer is a plain sequential create: a lost reply can put it
twice).

Taking an item is: list, sort by name, read the head, delete it. The delete
decides who has the item:

- it succeeds: ours;
- NoNode on the first try: another consumer took it; on to the next;
- the connection (or the session) goes before its reply: the delete is sent
  again once connected, and NoNode then cannot tell our first delete from another
  consumer's. **The item is delivered** (at-least-once for this one case,
  logged): Curator drops it and returns the next one, so an item taken by
  nobody vanishes. So SimpleQueue is exactly-once while the connection
  holds, and at-least-once when a delete's reply is lost.

Waiting (``take``, ``poll`` with a timeout) rests on a child watch of the
directory, or an exists watch while the directory is absent (the server
reaps an empty container: Curator's CURATOR-308 hang), and lists again on
every event, NONE and every reconnect included: a dropped watch is never
taken for "nothing changed". A wait never outlives its timeout.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Protocol, final

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import StateChange
from zk_recipes._client.steps import Reply, Steps, run_blocking
from zk_recipes._errors import (
    ClientStateError,
    ConnectionLostError,
    NoNodeError,
    OperationTimeoutError,
    SessionLost,
    ZkTimeoutError,
)
from zk_recipes._internals.args import require_client
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.waits import NewWake, Sleep
from zk_recipes._queue.deletes import delete_taken, delete_taken_steps
from zk_recipes._queue.putting import Putter
from zk_recipes._types import WatchEvent, mark_inline

log = logging.getLogger("zk_recipes.queue")

PREFIX = "qn-"
#: How long a take waits between two looks while disconnected.
_DISCONNECTED_LOOK = 0.2


class Settable(Protocol):
    """What a wake is: a ``threading.Event``, or the asyncio driver's ``LoopWake``."""

    def set(self) -> None: ...


class _Wake:
    """A watch callback that only wakes a waiter (on the connection thread: mark_inline)."""

    def __init__(self, event: Settable) -> None:
        self._event = event

    def __call__(self, event: WatchEvent) -> None:
        self._event.set()


mark_inline(_Wake)


@final
class SimpleQueue:
    """A FIFO of byte strings at ``path``: ``offer``, ``take``, ``poll``, ``peek``, ``len``."""

    def __init__(self, client: ZkClient, path: str) -> None:
        self.client = require_client(client, "SimpleQueue")
        self.path = _paths.validate_path(path, what="the queue's path")
        #: Puts with a marker (``<path>-puts``); the directory is a CONTAINER, as Curator's.
        self._putter = Putter(self.client, self.path, lambda: client.ensure_path(self.path))

    def offer(self, data: bytes) -> str:
        """Add an item at the tail; returns its node's path.

        Exactly once on a lost reply: one multi with a marker of this producer
        (``putting.py``), and ``TransactionOutcomeUnknown`` when the session
        itself ended before the reply came.
        """
        data = _paths.validate_data(data, path=self.path, limit=self.client.settings.max_data_bytes)
        return self._putter.put(data, PREFIX)

    def close(self) -> None:
        """Delete this producer's put marker now (it goes with the session anyway)."""
        self._putter.close()

    def peek(self) -> bytes | None:
        """The head item without taking it; None when the queue is empty."""
        return run_blocking(self._peek_steps())

    def poll(self, timeout: float | None = 0.0) -> bytes | None:
        """Take the head item, waiting up to ``timeout`` seconds (None: for ever); None if none."""
        return run_blocking(self._poll_steps(timeout))

    def take(self, timeout: float | None = None) -> bytes:
        """Take the head item, waiting for one; ZkTimeoutError after ``timeout`` seconds."""
        found = self.poll(timeout)
        if found is None:
            raise self._nothing_within(timeout)
        return found

    def _nothing_within(self, timeout: float | None) -> ZkTimeoutError:
        return ZkTimeoutError(f"no item in the queue {self.path} within {timeout:g} s")

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"<SimpleQueue {self.path}>"

    # -- taking (steps: run blocking above, awaited by aio.SimpleQueue) --------
    def _peek_steps(self) -> Steps[bytes | None]:
        limit = self.client.settings.connection_timeout
        for name in (yield from self._names_steps(None)):
            try:
                data, _stat = yield Reply(
                    self.client.get_async(_paths.join(self.path, name)), limit
                )
            except NoNodeError:
                continue
            return data  # type: ignore[no-any-return]
        return None

    def _poll_steps(
        self, timeout: float | None, cancel: Cancellation | None = None
    ) -> Steps[bytes | None]:
        """``poll``; ``cancel`` (the asyncio form's) ends the wait, and no delete is sent after."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        wake = yield NewWake()
        watch = _Wake(wake)
        listener = _StateWake(wake)
        self.client.add_listener(listener)
        try:
            with contextlib.ExitStack() as stack:
                if cancel is not None:
                    stack.enter_context(cancel.wakes(wake))
                while cancel is None or not cancel.is_set():
                    found = yield from self._take_head_steps(watch, cancel)
                    if found is not None:
                        return found
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return None
                    connected = self.client.state is not None and self.client.state.is_connected
                    pause = (
                        left if connected else min(_DISCONNECTED_LOOK, left or _DISCONNECTED_LOOK)
                    )
                    yield Sleep(wake, pause)  # then cleared: the next look lists again
                return None
        finally:
            self.client.remove_listener(listener)

    def _pause(self, left: float | None) -> float | None:
        """How long a wait sleeps before it looks again (briefly while disconnected)."""
        state = self.client.state
        if state is not None and state.is_connected:
            return left
        return min(_DISCONNECTED_LOOK, left or _DISCONNECTED_LOOK)

    def _names(self, watch: _Wake | None = None) -> list[str]:
        """The item names in order; with ``watch``, a watch that fires at the next change."""
        return run_blocking(self._names_steps(watch))

    def _names_steps(self, watch: _Wake | None) -> Steps[list[str]]:
        client = self.client
        limit = client.settings.connection_timeout
        try:
            names = yield Reply(client.get_children_async(self.path, watch=watch), limit)
        except NoNodeError:
            if watch is None:
                return []
            try:
                there = yield Reply(client.exists_async(self.path, watch=watch), limit)
            except (ConnectionLostError, OperationTimeoutError, ClientStateError, SessionLost):
                return []
            if there is not None:
                return (yield from self._names_steps(watch))  # made between the two reads
            return []
        except (ConnectionLostError, OperationTimeoutError, ClientStateError, SessionLost):
            return []  # looked at again once connected (the state listener wakes the wait)
        return sorted(name for name in names if name.startswith(PREFIX))

    def _take_head_steps(
        self, watch: _Wake, cancel: Cancellation | None = None
    ) -> Steps[bytes | None]:
        limit = self.client.settings.connection_timeout
        for name in (yield from self._names_steps(watch)):
            item = _paths.join(self.path, name)
            try:
                data, _stat = yield Reply(self.client.get_async(item), limit)
            except NoNodeError:
                continue  # taken since the listing
            except (ConnectionLostError, OperationTimeoutError, SessionLost):
                return None
            if cancel is not None and cancel.is_set():
                return None  # cancelled before the delete: the item stays for the others
            if (yield from delete_taken_steps(self.client, item)):
                return data  # type: ignore[no-any-return]
        return None

    def _delete(self, item: str) -> bool:
        """Delete ``item``: True when it is ours to deliver (``deletes.py``)."""
        return delete_taken(self.client, item)


class _StateWake:
    """A state listener that wakes a waiter on every change (a reconnect re-lists)."""

    def __init__(self, event: Settable) -> None:
        self._event = event

    def __call__(self, change: StateChange) -> None:
        self._event.set()
