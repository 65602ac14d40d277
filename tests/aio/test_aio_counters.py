"""aio.AtomicLong, aio.AtomicInt and aio.SharedCount on a real server: the sync counters' steps.

Tasks and threads updating one counter add up exactly (the same tries and
versioned writes, the promotion's lock an aio.Lock in the sync lock's queue);
the bytes are the sync (and Curator's) ones; a SharedCount's values reach a
coroutine as an async iterator and its versioned write refuses a stale version.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.aio.loops import run_on
from zk_recipes import (
    AtomicLong,
    PromotedToLock,
    RecipeUsageError,
    RetryNTimes,
    SharedCount,
    VersionedValue,
    ZkClient,
    aio,
)
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_tasks_and_threads_add_up_exactly_through_the_promoted_lock(
    loop: str, zk_client_factory: ClientFactory
) -> None:
    # No optimistic retries: a conflict goes to the promoted tries, under a lock
    # that asyncio (aio.Lock) and sync (Lock) updaters share.
    promoted = PromotedToLock("/counters/lock", retry_policy=RetryNTimes(100, 0.005))
    policy = RetryNTimes(0, 0)
    sync_counter = AtomicLong(
        zk_client_factory(), "/counters/n", retry_policy=policy, promote_to_lock=promoted
    )
    clients = [zk_client_factory() for _ in range(4)]
    results: list[tuple[bool, int, int]] = []
    guard = threading.Lock()

    def sync_side() -> None:
        for _ in range(10):
            value = sync_counter.increment()
            with guard:
                results.append((value.succeeded, value.pre, value.post))

    async def main() -> int:
        counters = [
            aio.AtomicLong(client, "/counters/n", retry_policy=policy, promote_to_lock=promoted)
            for client in clients
        ]

        async def one(counter: aio.AtomicLong) -> None:
            for _ in range(10):
                value = await counter.increment()
                results.append((value.succeeded, value.pre, value.post))

        await asyncio.wait_for(
            asyncio.gather(*(one(c) for c in counters), asyncio.to_thread(sync_side)), 60
        )
        return await counters[0].get()

    final = run_on(loop, main())
    assert all(succeeded for succeeded, _, _ in results)
    assert final == 50
    assert sorted(post for _, _, post in results) == list(range(1, 51))  # each value once


def test_the_asyncio_forms_write_the_sync_bytes_and_answer_as_the_sync_ones(
    zk_client: ZkClient,
) -> None:
    async def main() -> None:
        number = aio.AtomicInt(zk_client, "/counters/i")
        assert await number.get() == 0  # no node yet
        assert await number.initialize(-2)
        assert not await number.initialize(5)  # there already
        assert (await zk_client.aio.get("/counters/i"))[0].hex() == "fffffffe"
        value = await number.add(3)
        assert (value.succeeded, value.pre, value.post) == (True, -2, 1)
        refused = await number.compare_and_set(7, 9)
        assert (refused.succeeded, refused.pre, refused.post) == (False, 1, 1)
        assert (await number.compare_and_set(1, 2147483647)).succeeded
        wrapped = await number.increment()  # Java's int wraps
        assert wrapped.post == -2147483648
        await number.force_set(4)
        assert await number.get() == 4
        with pytest.raises(Exception, match="delta"):
            await number.add(2**31)
        assert repr(number).startswith("<aio.AtomicInt /counters/i")

    asyncio.run(main())
    assert AtomicLong(zk_client, "/counters/l").get() == 0


def test_a_shared_count_streams_newer_values_and_refuses_a_stale_version(
    zk_client_factory: ClientFactory,
) -> None:
    writer_client, reader_client = zk_client_factory(), zk_client_factory()
    with SharedCount(writer_client, "/counters/shared", seed=1) as sync_count:

        async def main() -> list[int]:
            seen: list[int] = []
            async with aio.SharedCount(reader_client, "/counters/shared", seed=99) as count:
                assert count.get() == 1  # the seed of the first to start
                stale = count.versioned()
                values = count.values()
                await asyncio.to_thread(sync_count.set, 5)
                seen.append(await asyncio.wait_for(values.__anext__(), 10))
                assert count.get() == 5
                assert not await count.try_set(stale, 7)  # the node changed since
                fresh = count.versioned()
                assert isinstance(fresh, VersionedValue)
                assert fresh.value == 5
                assert await count.try_set(fresh, 8)
                await count.set(9)
                assert (await count.refresh()).value == 9
                async for value in values:  # newer values, the newest when behind
                    seen.append(value)
                    if value == 9:
                        break
                count.close()
                assert [v async for v in values] == []  # a closed count's stream ends
                with pytest.raises(RecipeUsageError, match="closed"):
                    count.values()
            return seen

        seen = asyncio.run(main())
        assert seen[0] == 5
        assert seen[-1] == 9
        assert seen == sorted(seen)
        assert sync_count.get() == 9


def test_misuse_is_refused(zk_client: ZkClient) -> None:
    count = aio.SharedCount(zk_client, "/counters/unstarted", seed=0)
    with pytest.raises(RecipeUsageError, match="not started"):
        count.get()
    with pytest.raises(RecipeUsageError, match="running event loop"):
        count.values()

    async def main() -> None:
        with pytest.raises(RecipeUsageError, match="not started"):
            await count.set(1)

    asyncio.run(main())
