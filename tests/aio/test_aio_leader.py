"""aio.LeaderLatch against a real server: one election with the sync latch, waits awaited."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.aio.loops import run_on
from zk_recipes import LeaderLatch, ZkClient, aio
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_one_election_with_the_sync_latch_and_the_turn_passes_on_close(
    loop: str,
    zk_client_factory: ClientFactory,
) -> None:
    sync_latch = LeaderLatch(zk_client_factory(), "/aio-election", "sync").start()
    assert sync_latch.await_leadership(10)
    threads = threading.active_count()

    async def main() -> None:
        latches = [aio.LeaderLatch(zk_client_factory(), "/aio-election", f"a{i}") for i in (1, 2)]
        for latch in latches:
            latch.start()
        assert not await latches[0].await_leadership(0.3)  # the sync latch leads
        waiting = [asyncio.ensure_future(latch.await_leadership(20)) for latch in latches]
        await asyncio.to_thread(sync_latch.close)
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        first = latches[waiting.index(done.pop())]
        assert first.has_leadership()
        assert (await first.participants())[0].id == first._latch.identifier
        other = latches[1 - latches.index(first)]
        assert not other.has_leadership()
        token = first.fencing_token
        await first.close()
        assert await asyncio.wait_for(waiting[latches.index(other)], 20)
        assert other.fencing_token > token
        await other.close()

    run_on(loop, main())
    # The waits held no thread of their own (each latch has its one thread, as in sync).
    assert threading.active_count() <= threads + 2 + aio.POOL_THREADS


def test_a_cancelled_wait_stops_at_once_and_a_closed_client_ends_it(
    zk_client_factory: ClientFactory, zk_client: ZkClient
) -> None:
    holder = LeaderLatch(zk_client, "/aio-election-2").start()
    assert holder.await_leadership(10)
    client = zk_client_factory()

    async def main() -> None:
        async with aio.LeaderLatch(client, "/aio-election-2") as latch:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(latch.await_leadership(), 0.3)
            assert latch._latch._waiters == set()  # the cancelled wait unregistered itself
            waiting = asyncio.ensure_future(latch.await_leadership())
            await asyncio.sleep(0.1)
            await asyncio.to_thread(client.close)
            assert await asyncio.wait_for(waiting, 5) is False

    asyncio.run(main())  # leaving on a closed client: its node went with its session
    holder.close()
