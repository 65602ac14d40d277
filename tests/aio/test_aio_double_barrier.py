"""aio.DoubleBarrier against a real server: the sync double barrier's rounds, awaited.

Asyncio and sync members enter together and leave together; an enter that
times out, or is cancelled, leaves no member node behind.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.aio.loops import run_on
from tests.containers import children_of
from zk_recipes import DoubleBarrier, ZkClient, aio
from zk_recipes.testing import wait_for_children
from zk_recipes.testing.pytest_plugin import ClientFactory

PATH = "/aio/double"


def test_asyncio_and_sync_members_enter_and_leave_together(
    loop: str, zk_client_factory: ClientFactory
) -> None:
    sync_member = DoubleBarrier(zk_client_factory(), PATH, 3)

    async def main() -> None:
        members = [aio.DoubleBarrier(zk_client_factory(), PATH, 3) for _ in range(2)]
        inside: list[int] = []

        async def member(index: int) -> None:
            async with members[index]:
                inside.append(index)
                assert members[index].is_entered()

        tasks = [asyncio.ensure_future(member(i)) for i in range(2)]
        await asyncio.to_thread(wait_for_children, sync_member.client, PATH, 2)
        assert inside == []  # two of three: nobody is in yet
        assert await asyncio.to_thread(sync_member.enter, 10)
        assert await asyncio.to_thread(sync_member.leave, 10)
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        assert sorted(inside) == [0, 1]
        assert await members[0].members() == []

    run_on(loop, main())
    assert children_of(sync_member.client, PATH) in ([], ["ready"])


def test_an_enter_that_times_out_or_is_cancelled_leaves_no_node(zk_client: ZkClient) -> None:
    async def main() -> None:
        barrier = aio.DoubleBarrier(zk_client, PATH, 2)
        assert not await barrier.enter(timeout=0.3)
        assert children_of(zk_client, PATH) == []
        waiting = asyncio.ensure_future(barrier.enter())
        await asyncio.to_thread(wait_for_children, zk_client, PATH, 1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert children_of(zk_client, PATH) == []
        assert not barrier.is_entered()

    asyncio.run(main())
