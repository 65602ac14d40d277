"""``aio.AtomicLong``, ``aio.AtomicInt`` and ``aio.SharedCount``: the counters awaited.

Not second counters: each holds the sync recipe and drives its steps
(``_counters/atomic.py``, ``_counters/shared_count.py``: the reads retried
under the client's policy, the versioned writes, the back-off between tries)
with the asyncio driver, so the bytes, the tries and the rules ("a lost
write reply is never resent") are the sync ones. What is their own: the
promoted tries of an atomic number are held under an ``aio.Lock`` (the same
lock path, in one queue with sync and Java PromotedToLock holders), and a
SharedCount's newer values come as an async iterator.

Cancelling an update while its write is on the wire is a lost reply: the
write may or may not be applied; read the value again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import ClassVar

from zk_recipes._client.awaitable import LoopWake
from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import call_step
from zk_recipes._counters.atomic import (
    AtomicInt as _SyncAtomicInt,
    AtomicLong as _SyncAtomicLong,
    AtomicValue,
    PromotedToLock,
    _Try,
)
from zk_recipes._counters.encoding import check_int
from zk_recipes._counters.shared_count import SharedCount as _SyncSharedCount, VersionedValue
from zk_recipes._errors import RecipeUsageError
from zk_recipes._retry import RetryPolicy
from zk_recipes.aio._drive import run_awaited
from zk_recipes.aio._lock import Lock

_SyncNumber = _SyncAtomicLong | _SyncAtomicInt


class _AtomicNumber:
    _Sync: ClassVar[type[_SyncAtomicLong] | type[_SyncAtomicInt]]

    def __init__(
        self,
        client: ZkClient,
        path: str,
        *,
        retry_policy: RetryPolicy | None = None,
        promote_to_lock: PromotedToLock | str | None = None,
    ) -> None:
        self._sync: _SyncNumber = self._Sync(
            client, path, retry_policy=retry_policy, promote_to_lock=promote_to_lock
        )
        self.client = self._sync.client
        self.path = self._sync.path
        self.retry_policy = self._sync.retry_policy
        self.promote_to_lock = self._sync.promote_to_lock
        promoted = self.promote_to_lock
        self._lock = Lock(client, promoted.lock_path) if promoted is not None else None
        self._bits = self._sync._bits

    async def get(self) -> int:
        """The current value (0 when the node does not exist or is empty)."""
        return await run_awaited(self._sync._get_steps(), None)

    async def increment(self) -> AtomicValue:
        return await self._update(lambda value: value + 1)

    async def decrement(self) -> AtomicValue:
        return await self._update(lambda value: value - 1)

    async def add(self, delta: int) -> AtomicValue:
        check_int(delta, self._bits, "delta")
        return await self._update(lambda value: value + delta)

    async def subtract(self, delta: int) -> AtomicValue:
        check_int(delta, self._bits, "delta")
        return await self._update(lambda value: value - delta)

    async def try_set(self, value: int) -> AtomicValue:
        """Set ``value`` through the same tries as ``add`` (versioned writes, maybe promoted)."""
        check_int(value, self._bits, "value")
        return await self._update(lambda _old: value)

    async def compare_and_set(self, expected: int, value: int) -> AtomicValue:
        """One try: write ``value`` if the counter is ``expected`` (a missing node counts as 0)."""
        return await run_awaited(self._sync._compare_and_set_steps(expected, value), None)

    async def force_set(self, value: int) -> None:
        """Write ``value`` unconditionally (creating the node if needed)."""
        await run_awaited(self._sync._force_set_steps(value), None)

    async def initialize(self, value: int) -> bool:
        """Create the node with ``value`` if it does not exist; False if it does."""
        return await run_awaited(self._sync._initialize_steps(value), None)

    async def _update(self, compute: Callable[[int], int]) -> AtomicValue:
        sync = self._sync
        first = await run_awaited(sync._optimistic_steps(compute), None)
        promoted = sync._promotion(first)
        if promoted is None or self._lock is None:
            return first
        started = time.monotonic()
        result: tuple[_Try, int] | None = None
        if await self._lock.acquire(timeout=promoted.timeout):
            try:
                result = await run_awaited(sync._tries_steps(compute, promoted.retry_policy), None)
            finally:
                await self._lock.release()
        return sync._promoted_value(first, result, started)

    def __repr__(self) -> str:
        return "<aio." + repr(self._sync)[1:]


class AtomicLong(_AtomicNumber):
    """A 64-bit counter updated by compare-and-set, awaited: AtomicLong's twin.

    ``aio.AtomicLong(client, "/counters/orders", retry_policy=None,
    promote_to_lock=None)``: ``await counter.increment()``, ``await
    counter.add(n)``, ``await counter.compare_and_set(expected, value)``...
    each returns an ``AtomicValue`` as the sync one's; the same bytes
    (Curator's DistributedAtomicLong), tries and promotion, whose lock is an
    ``aio.Lock``. The back-off between tries is a timer on the loop.
    """

    _Sync = _SyncAtomicLong


class AtomicInt(_AtomicNumber):
    """As ``aio.AtomicLong``, with 4 bytes and 32-bit arithmetic (DistributedAtomicInteger)."""

    _Sync = _SyncAtomicInt


class SharedCount:
    """A shared 32-bit int for asyncio code: SharedCount's twin (Curator's SharedCount bytes).

    ``async with aio.SharedCount(client, "/config/workers", seed=4) as count:``
    (or ``await count.start()`` and ``count.close()``); ``get()`` and
    ``versioned()`` read the value as last seen (kept current by a watch;
    never blocking), ``await count.set(v)``, ``await count.try_set(count.versioned(),
    v) -> bool``, ``await count.refresh()``; ``async for value in
    count.values():`` each newer value (the newest only, when several came
    while the consumer was busy: ZooKeeper may coalesce them too). The start
    (seeding the node, the first read) runs on the asyncio pool; the writes
    and reads after it are awaited requests.
    """

    def __init__(self, client: ZkClient, path: str, seed: int) -> None:
        self._sync = _SyncSharedCount(client, path, seed)
        self.client = self._sync.client
        self.path = self._sync.path
        self.seed = self._sync.seed

    async def start(self) -> SharedCount:
        """Create the node with ``seed`` if it is absent, read it and start watching."""
        await run_awaited(call_step(self._sync.start), None)
        return self

    def close(self) -> None:
        """Stop watching (never blocks). Idempotent; ends every ``values()`` stream."""
        self._sync.close()

    async def __aenter__(self) -> SharedCount:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def get(self) -> int:
        """The value as last seen (kept current by the watch)."""
        return self._sync.get()

    def versioned(self) -> VersionedValue:
        """The value as last seen and its node version (for ``try_set``)."""
        return self._sync.versioned()

    async def refresh(self) -> VersionedValue:
        """Read the node now and return what is current."""
        return await run_awaited(self._sync._refresh_steps(), None)

    async def set(self, value: int) -> None:
        """Write ``value`` unconditionally."""
        await run_awaited(self._sync._set_steps(value), None)

    async def try_set(self, previous: VersionedValue, value: int) -> bool:
        """Write ``value`` only if the count is still ``previous``; False if it changed."""
        return await run_awaited(self._sync._try_set_steps(previous, value), None)

    def values(self) -> CountValues:
        """Newer values from now on, as an async iterator (ends when the count is closed)."""
        return CountValues(self)

    def __repr__(self) -> str:
        return "<aio." + repr(self._sync)[1:]


class CountValues:
    """``async for value in count.values()``: each newer value, the newest when behind."""

    def __init__(self, count: SharedCount) -> None:
        try:
            self._wake = LoopWake()
        except RuntimeError:
            raise RecipeUsageError(
                "count.values() needs a running event loop: call it in a coroutine"
            ) from None
        self._count = count
        self._latest: int | None = None
        self._ended = False
        count._sync.add_listener(self._heard)

    def _heard(self, value: int) -> None:
        """On the count's listener thread: hand the value to the loop."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody reads
            self._wake.loop.call_soon_threadsafe(self._put, value)

    def _put(self, value: int) -> None:
        self._latest = value
        self._wake.set()

    def __aiter__(self) -> CountValues:
        return self

    async def __anext__(self) -> int:
        while self._latest is None:
            if self._ended or self._count._sync._life.closed:
                await self.aclose()
                raise StopAsyncIteration
            await asyncio.wait({self._wake.future}, timeout=1.0)
            self._wake.clear()
        value, self._latest = self._latest, None
        return value

    async def aclose(self) -> None:
        """Stop listening."""
        if not self._ended:
            self._ended = True
            self._count._sync.remove_listener(self._heard)
