"""aio.CacheEvents against a real server: a cache's events as an async iterator."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.aio.loops import run_on
from zk_recipes import (
    CacheEvent,
    CacheEventType,
    EventsBehindError,
    NodeCache,
    TreeCache,
    ZkClient,
    aio,
)
from zk_recipes.testing import wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_a_tree_caches_events_in_order_and_the_stream_ends_with_the_cache(
    loop: str,
    zk_client_factory: ClientFactory,
) -> None:
    writer, watcher = zk_client_factory(), zk_client_factory()
    writer.create("/tree")

    async def main() -> None:
        tree = TreeCache(watcher, "/tree").start()
        async with aio.CacheEvents(tree) as events:

            async def next_event() -> tuple[CacheEventType, str | None]:
                event = await asyncio.wait_for(events.__anext__(), 10)
                return event.type, event.path

            assert await next_event() == (CacheEventType.CREATED, "/tree")
            assert await next_event() == (CacheEventType.INITIALIZED, None)
            await writer.aio.create("/tree/a", b"1")
            assert await next_event() == (CacheEventType.CREATED, "/tree/a")
            await writer.aio.set("/tree/a", b"2")
            assert await next_event() == (CacheEventType.CHANGED, "/tree/a")
            await writer.aio.delete("/tree/a")
            assert await next_event() == (CacheEventType.DELETED, "/tree/a")
            assert tree.current().keys() == {"/tree"}  # the snapshot never blocks: read it here
            tree.close()
            assert [event async for event in events] == []  # ends once the cache is closed

    run_on(loop, main())


def _shows(node: NodeCache, value: int) -> Callable[[], bool]:
    def check() -> bool:
        cached = node.current()
        return cached is not None and cached.data == str(value).encode()

    return check


async def _drain(events: aio.CacheEvents, into: list[CacheEvent]) -> None:
    async for event in events:
        into.append(event)


def test_a_consumer_that_falls_behind_is_told_and_nothing_is_dropped_silently(
    zk_client: ZkClient,
) -> None:
    zk_client.create("/node", b"0")

    async def main() -> None:
        with NodeCache(zk_client, "/node") as node:
            assert await asyncio.to_thread(node.wait_initialized, 10)
            events = aio.CacheEvents(node, max_queued=3)
            for value in range(1, 6):  # one at a time: five CHANGED events, not one
                await zk_client.aio.set("/node", str(value).encode())
                await asyncio.to_thread(wait_until, _shows(node, value), "the cache follows")
            await asyncio.sleep(0.2)  # the last event reaches the loop
            got: list[CacheEvent] = []
            with pytest.raises(EventsBehindError, match="fell more than 3 events behind"):
                await _drain(events, got)
            assert [e.type for e in got] == [CacheEventType.CHANGED] * 3  # the queued are read

    asyncio.run(main())
