"""aio.ReadWriteLock against a real server: the sync halves' queue, held per task.

Readers share (a node per task), a writer holds alone, in order; sync and
asyncio halves on one path exclude each other both ways; the writing task
may downgrade, a reading task asking to write is refused at once; a
cancelled wait leaves no node; a read hold lost with its session is seen.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.aio.loops import run_on
from tests.containers import children_of
from zk_recipes import LockLost, ReadWriteLock, RecipeUsageError, ZkClient, aio
from zk_recipes.testing import expire_session, wait_for_children
from zk_recipes.testing.pytest_plugin import ClientFactory

PATH = "/aio/rw"


def test_readers_share_and_a_writer_waits_for_them(loop: str, zk_client: ZkClient) -> None:
    async def main() -> None:
        rw = aio.ReadWriteLock(zk_client, PATH)
        both_in = asyncio.Barrier(2) if hasattr(asyncio, "Barrier") else None
        out = asyncio.Event()
        tokens: list[int] = []

        async def reader() -> None:
            async with rw.read_lock:
                assert rw.read_lock.is_held()
                tokens.append(rw.read_lock.fencing_token)
                if both_in is not None:
                    await both_in.wait()  # both readers inside at once
                await out.wait()

        readers = [asyncio.ensure_future(reader()) for _ in range(2)]
        await asyncio.to_thread(wait_for_children, zk_client, PATH, 2)

        async def write() -> None:
            async with rw.write_lock:
                assert rw.write_lock.is_held()

        writer = asyncio.ensure_future(write())
        await asyncio.to_thread(wait_for_children, zk_client, PATH, 3)
        assert not writer.done()
        assert len(set(tokens)) == 2  # a node per task
        out.set()
        await asyncio.gather(*readers, writer)

    run_on(loop, main())
    assert children_of(zk_client, PATH) == []


def test_sync_and_asyncio_halves_exclude_each_other_both_ways(
    zk_client_factory: ClientFactory,
) -> None:
    sync_client, aio_client = zk_client_factory(), zk_client_factory()
    sync_rw = ReadWriteLock(sync_client, PATH)

    def read_and_release() -> bool:
        if not sync_rw.read_lock.acquire(blocking=False):
            return False
        sync_rw.read_lock.release()
        return True

    async def main() -> None:
        rw = aio.ReadWriteLock(aio_client, PATH)
        with sync_rw.write_lock:
            assert not await rw.read_lock.acquire(blocking=False)
            assert rw.read_lock.statistics().refusal == "held"
        async with rw.write_lock:
            assert not await asyncio.to_thread(sync_rw.read_lock.acquire, False)
        async with rw.read_lock:  # readers of both kinds share
            assert await asyncio.to_thread(read_and_release)

    asyncio.run(main())
    assert children_of(sync_client, PATH) == []


def test_a_reader_after_a_queued_writer_waits_behind_it(zk_client_factory: ClientFactory) -> None:
    first, second = zk_client_factory(), zk_client_factory()
    held = ReadWriteLock(first, PATH).read_lock

    async def main() -> None:
        rw = aio.ReadWriteLock(second, PATH)
        order: list[str] = []

        async def take(half: aio.WriteLock | aio.ReadLock, name: str) -> None:
            async with half:
                order.append(name)

        writer = asyncio.ensure_future(take(rw.write_lock, "writer"))
        await asyncio.to_thread(wait_for_children, first, PATH, 2)
        reader = asyncio.ensure_future(take(rw.read_lock, "reader"))
        await asyncio.to_thread(wait_for_children, first, PATH, 3)
        assert order == []
        await asyncio.get_running_loop().run_in_executor(one_thread, held.release)
        await asyncio.gather(writer, reader)
        assert order == ["writer", "reader"]

    with ThreadPoolExecutor(1) as one_thread:  # a read hold is released by its own thread
        assert one_thread.submit(held.acquire).result()
        asyncio.run(main())


def test_the_writing_task_downgrades_and_a_reading_task_may_not_upgrade(
    zk_client: ZkClient,
) -> None:
    async def main() -> None:
        rw = aio.ReadWriteLock(zk_client, PATH)
        async with rw.write_lock:
            assert await rw.read_lock.acquire(timeout=5)  # the downgrade: no wait for itself
            write_node = str(rw.write_lock.node).rsplit("__WRIT__", 1)[1]
            assert str(rw.read_lock.node).endswith(write_node)  # at the writer's place
        assert rw.read_lock.is_held()
        other = aio.ReadWriteLock(zk_client, PATH)
        assert not await other.write_lock.acquire(blocking=False)  # our read excludes writers
        with pytest.raises(RecipeUsageError, match="upgrading to the write lock"):
            await rw.write_lock.acquire(timeout=1)
        await rw.read_lock.release()
        with pytest.raises(RecipeUsageError, match="not held by this task"):
            await rw.read_lock.release()

    asyncio.run(main())
    assert children_of(zk_client, PATH) == []


def test_a_cancelled_read_wait_leaves_no_node(loop: str, zk_client_factory: ClientFactory) -> None:
    holder_client, waiter_client = zk_client_factory(), zk_client_factory()
    writer = ReadWriteLock(holder_client, PATH).write_lock
    assert writer.acquire()

    async def main() -> None:
        rw = aio.ReadWriteLock(waiter_client, PATH)
        task = asyncio.ensure_future(rw.read_lock.acquire())
        await asyncio.to_thread(wait_for_children, holder_client, PATH, 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert children_of(holder_client, PATH) == [str(writer.node).rsplit("/", 1)[1]]

    run_on(loop, main())
    writer.release()


def test_a_read_hold_lost_with_its_session_is_seen(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()

    async def main() -> None:
        rw = aio.ReadWriteLock(client, PATH)
        async with rw.read_lock:
            await asyncio.to_thread(expire_session, client)
            await asyncio.wait_for(rw.read_lock.lost.wait(), 10)
            assert not rw.read_lock.is_held()
            with pytest.raises(LockLost):
                rw.read_lock.check()

    asyncio.run(main())
