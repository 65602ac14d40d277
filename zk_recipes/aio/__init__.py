"""zk-recipes for asyncio: the recipes awaited, on the same machinery as the sync API.

``from zk_recipes import aio``, then ``async with aio.Lock(zk, "/locks/x"):``, or
``async with aio.LeaderLatch(zk, "/election") as latch: await latch.await_leadership()``.
The client's own requests are ``zk.aio`` (``await zk.aio.get(path)``,
``async for change in zk.aio.states()``). Waiting holds no thread; cancelling
a waiting acquire deletes its node before the CancelledError goes on. See
docs/asyncio.md for what each form does and which thread runs what.
"""

from __future__ import annotations

from zk_recipes._client.awaitable import AsyncRequests, StateChanges
from zk_recipes.aio._barrier import Barrier, DoubleBarrier
from zk_recipes.aio._cache import CacheEvents
from zk_recipes.aio._counters import AtomicInt, AtomicLong, CountValues, SharedCount
from zk_recipes.aio._discovery import ServiceDiscovery
from zk_recipes.aio._drive import POOL_THREADS
from zk_recipes.aio._leader import LeaderLatch
from zk_recipes.aio._lock import Lock, RLock
from zk_recipes.aio._multilock import MultiLock
from zk_recipes.aio._queues import DistributedQueue, SimpleQueue
from zk_recipes.aio._rwlock import ReadLock, ReadWriteLock, WriteLock
from zk_recipes.aio._selector import LeaderSelector
from zk_recipes.aio._semaphore import Semaphore, SemaphoreMutex

__all__ = [
    "POOL_THREADS",
    "AsyncRequests",
    "AtomicInt",
    "AtomicLong",
    "Barrier",
    "CacheEvents",
    "CountValues",
    "DistributedQueue",
    "DoubleBarrier",
    "LeaderLatch",
    "LeaderSelector",
    "Lock",
    "MultiLock",
    "RLock",
    "ReadLock",
    "ReadWriteLock",
    "Semaphore",
    "SemaphoreMutex",
    "ServiceDiscovery",
    "SharedCount",
    "SimpleQueue",
    "StateChanges",
    "WriteLock",
]
