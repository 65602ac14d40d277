"""``aio.CacheEvents``: a cache's events as an async iterator (``async for event in ...``).

Not a second cache: it listens to a TreeCache, ChildrenCache or NodeCache
(whose worker thread tells its listeners in order) and hands each event to
the loop (``call_soon_threadsafe``). The cache's own ``current()`` and
``get()`` never block: read them from a coroutine directly.

A consumer that falls more than ``max_queued`` events behind gets
``EventsBehindError`` once it has read what was queued: events are never
dropped silently (a view built from the stream would be wrong), and memory
stays bounded. The stream ends after the cache's FAILED event, and within a
second of ``cache.close()``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Protocol

from zk_recipes._cache.values import CacheEvent, CacheEventType
from zk_recipes._client.awaitable import LoopWake
from zk_recipes._errors import EventsBehindError, RecipeUsageError

#: How often an idle stream looks whether its cache was closed (seconds).
_CLOSED_LOOK = 1.0


class _Cache(Protocol):
    """What a stream needs of a cache face (TreeCache, ChildrenCache, NodeCache)."""

    path: str

    def listen(self, listener: CacheListener) -> CacheStopper: ...

    @property
    def closed(self) -> bool: ...


class CacheListener(Protocol):
    def __call__(self, event: CacheEvent) -> object: ...


class CacheStopper(Protocol):
    def __call__(self) -> None: ...


class CacheEvents:
    """``async for event in aio.CacheEvents(cache)``: each event from now on, in order.

    Make it on the loop that iterates (it listens from that moment). ``max_queued``
    events at most wait for the consumer; past that, ``EventsBehindError``
    (see the module note). ``aclose()`` or ``async with`` stops listening.
    """

    def __init__(self, cache: _Cache, *, max_queued: int = 10_000) -> None:
        if max_queued < 1:
            raise RecipeUsageError(f"max_queued must be at least 1, got {max_queued!r}")
        try:
            self._wake = LoopWake()
        except RuntimeError:
            raise RecipeUsageError(
                "aio.CacheEvents needs a running event loop: make it in a coroutine"
            ) from None
        self._cache = cache
        self._max_queued = max_queued
        self._queued: collections.deque[CacheEvent] = collections.deque()
        self._behind = 0
        self._ended = False
        self._stop = cache.listen(self._heard)

    def _heard(self, event: CacheEvent) -> None:
        """On the cache's thread: hand the event to the loop."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody reads
            self._wake.loop.call_soon_threadsafe(self._put, event)

    def _put(self, event: CacheEvent) -> None:
        if self._behind or len(self._queued) >= self._max_queued:
            self._behind += 1
        else:
            self._queued.append(event)
        self._wake.set()

    def __aiter__(self) -> CacheEvents:
        return self

    async def __anext__(self) -> CacheEvent:
        while not self._queued:
            if self._ended:
                raise StopAsyncIteration
            if self._behind:
                await self.aclose()
                raise EventsBehindError(
                    f"the consumer of {self._cache.path}'s events fell more than "
                    f"{self._max_queued} events behind and {self._behind} were dropped: read "
                    "cache.current() again and start a new stream (or raise max_queued)"
                )
            if self._cache.closed:
                await self.aclose()
                raise StopAsyncIteration
            await asyncio.wait({self._wake.future}, timeout=_CLOSED_LOOK)
            self._wake.clear()
        event = self._queued.popleft()
        if event.type is CacheEventType.FAILED:
            await self.aclose()  # the last event: the cache stopped
        return event

    async def aclose(self) -> None:
        """Stop listening (what was queued can still be read)."""
        if not self._ended:
            self._ended = True
            self._stop()

    async def __aenter__(self) -> CacheEvents:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
