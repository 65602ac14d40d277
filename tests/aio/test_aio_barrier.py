"""aio.Barrier against a real server: many coroutines wait on one barrier, no thread each."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.aio.loops import run_on
from zk_recipes import Barrier, ClientStateError, aio
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_waiters_are_released_together_when_a_sync_barrier_comes_down(
    loop: str, zk_client_factory: ClientFactory
) -> None:
    sync_barrier = Barrier(zk_client_factory(), "/aio-barrier")
    client = zk_client_factory()
    threads = threading.active_count()

    async def main() -> None:
        barrier = aio.Barrier(client, "/aio-barrier")
        await barrier.set_barrier()
        assert await barrier.is_set()
        assert not await barrier.wait(timeout=0.2)  # still up after the timeout
        waiting = [asyncio.ensure_future(barrier.wait(timeout=20)) for _ in range(50)]
        await asyncio.sleep(0.2)
        assert not any(w.done() for w in waiting)
        assert threading.active_count() <= threads + aio.POOL_THREADS
        await asyncio.to_thread(sync_barrier.remove_barrier)
        assert await asyncio.wait_for(asyncio.gather(*waiting), 10) == [True] * 50
        assert not await barrier.is_set()

    run_on(loop, main())


def test_a_cancelled_wait_stops_and_a_closed_client_ends_a_wait(
    zk_client_factory: ClientFactory,
) -> None:
    Barrier(zk_client_factory(), "/aio-barrier-2").set_barrier()
    client = zk_client_factory()

    async def main() -> None:
        barrier = aio.Barrier(client, "/aio-barrier-2")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(barrier.wait(), 0.3)
        waiting = asyncio.ensure_future(barrier.wait())
        await asyncio.sleep(0.1)
        await asyncio.to_thread(client.close)
        with pytest.raises(ClientStateError):
            await asyncio.wait_for(waiting, 5)

    asyncio.run(main())
