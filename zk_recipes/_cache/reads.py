"""A cache's reads: what is in flight, how a reply is waited for, what a failed one becomes.

Every read goes out from the engine's worker and is applied in the order it
was sent (``engine.py``). A read that fails says one of four things:

- NoNode: the node is gone (DELETED).
- NoAuth: this client may not read the node (its ACL): the cache skips it
  and everything below it as if it were not there, says so once (an
  UNREADABLE event, a WARNING naming the path, the cache's ``unreadable``),
  and reads it again at every resync and at its next event. A walk ends, so
  INITIALIZED and RESYNCED come (a node one may not read is the normal state
  of a tree with mixed ACLs, not a failure).
- Any other error while the connection it went out on is still up (a reply
  that did not come in time from a slow or paused server, say): a read
  error. The same read is sent again after a back-off (``Backoff``: from
  ``RETRY_FIRST`` doubling to ``RETRY_MAX``), on that connection; never taken
  for a lost connection, which would leave the node stale until a reconnect
  that may never come.
- The connection it went out on is gone: the next connection's resync reads
  it again (a walk's read fails the walk; an event's read is noted in the
  engine's ``_dirty``), or it is sent again at once if a newer connection is
  up already.

Waiting for a reply ends soon after the cache is closed (``Replies``):
``close()`` never waits for a connection that is down.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from typing import Any, Protocol, TypeVar

from zk_recipes._deadline import session_clock
from zk_recipes._errors import OperationTimeoutError
from zk_recipes._types import WatchEvent, WatchEventType, ZnodeStat, mark_inline


class Queues(Protocol):
    """What the watch callbacks need of the engine: its work queue (``CacheEngine``)."""

    one_shot: bool

    def _queue(self, item: tuple[Any, ...]) -> None: ...

    def _zxid_now(self) -> int: ...


T_co = TypeVar("T_co", covariant=True)

#: The first retry of a failed read on a live connection, and the longest wait between two.
RETRY_FIRST = 0.1
RETRY_MAX = 5.0
#: How long the worker waits for a late reply before it looks whether it was closed.
SLICE = 0.1


class Reply(Protocol[T_co]):
    """A request in flight (the client's ``Pending``)."""

    def result(self, timeout: float | None = None) -> T_co: ...

    def done(self) -> bool: ...


@dataclasses.dataclass(slots=True)
class Read:
    """A read in flight: ``get`` of ``path`` (and its children, when ``children`` is set)."""

    path: str
    #: None for a listing alone (a walk that found the node's children changed).
    data: Reply[tuple[bytes, ZnodeStat]] | None
    #: Part of a walk (a re-synchronisation): descend below the node.
    walk: int
    children: Reply[list[str]] | None = None
    #: For a listing alone: the node's ``pzxid`` as this walk's read of it saw it.
    pzxid: int = 0
    #: The connection it went out on (``ZkClient.connection_generation``).
    generation: int = 0


class Closing(Exception):
    """The cache was closed while its worker waited for a reply: the worker ends."""


class Replies:
    """Waits for replies on the worker; ``interrupt()`` (from ``close()``) ends a wait soon.

    A late reply is waited for in slices of ``SLICE`` seconds, each kazoo's own
    wait (no thread hop for the usual reply, which comes within the first):
    between two, ``interrupt()`` is seen and the wait ends with ``Closing``.
    """

    def __init__(self) -> None:
        self._interrupted = False

    def result(self, pending: Reply[Any], timeout: float) -> Any:
        """``pending``'s result, its error, or ``Closing``."""
        if pending.done():  # the usual case in a pipeline: no clock, no wait
            return pending.result(0)
        deadline = session_clock() + timeout
        while True:
            if self._interrupted:
                raise Closing
            left = deadline - session_clock()
            try:
                return pending.result(max(0.0, min(SLICE, left)))
            except OperationTimeoutError:
                if pending.done() or left <= SLICE:
                    raise  # the server's own answer, or the whole timeout is over

    def interrupt(self) -> None:
        self._interrupted = True


class Backoff:
    """Reads to send again later, each after a delay that doubles per path (bounded).

    Only the worker uses it. ``note_success`` starts a path's delay over.
    """

    def __init__(self) -> None:
        self._tries: dict[str, int] = {}
        self._due: list[tuple[float, int, str, tuple[Any, ...]]] = []
        self._order = itertools.count()

    def later(self, now: float, key: str, kind: str, item: tuple[Any, ...]) -> int:
        """Queue ``item`` (of ``kind``) for its turn; returns how many tries ``key`` had."""
        tries = self._tries.get(key, 0) + 1
        self._tries[key] = tries
        delay = min(RETRY_FIRST * 2 ** (tries - 1), RETRY_MAX)
        heapq.heappush(self._due, (now + delay, next(self._order), kind, item))
        return tries

    def note_success(self, key: str) -> None:
        if self._tries:
            self._tries.pop(key, None)

    @property
    def waiting(self) -> bool:
        return bool(self._due)

    def due(self, now: float) -> list[tuple[str, tuple[Any, ...]]]:
        """The items whose time came, oldest first."""
        out = []
        while self._due and self._due[0][0] <= now:
            _, _, kind, item = heapq.heappop(self._due)
            out.append((kind, item))
        return out

    def wait(self, now: float) -> float | None:
        """How long until the next item is due (None: nothing waits)."""
        return max(0.0, self._due[0][0] - now) if self._due else None


class Sink:
    """The watch's callback: on the connection thread, it only queues the path (mark_inline).

    A DELETED notification of the persistent watch is final: it is queued
    with the zxid of the newest reply read before it (``ZkClient.last_zxid``),
    and applied without a read, in the read pipeline's order, to a cached
    node made no later than that zxid (``CacheEngine._gone``). A one-shot
    watch's DELETED is read like any other event (the mode that re-arms
    watches by reading).
    """

    def __init__(self, engine: Queues) -> None:
        self._engine = engine

    def __call__(self, event: WatchEvent) -> None:
        path = event.path
        if path is None or event.type is WatchEventType.NONE:
            return  # a one-shot watch dropped with the connection: the next walk re-arms it
        engine = self._engine
        if event.type is WatchEventType.CHILD:
            if engine.one_shot:  # a persistent watch's CHILD says nothing new
                engine._queue(("list", path))
            return
        if event.type is WatchEventType.DELETED and not engine.one_shot:
            engine._queue(("gone", path, engine._zxid_now()))
            return
        engine._queue(("event", path))


mark_inline(Sink)


class ChildCatchUp:
    """The CHILD events of a catch-up (a directory whose children changed): a listing each."""

    def __init__(self, engine: Queues) -> None:
        self._engine = engine

    def __call__(self, event: WatchEvent) -> None:
        if event.path is not None and event.type is WatchEventType.CHILD:
            self._engine._queue(("list", event.path))


mark_inline(ChildCatchUp)
