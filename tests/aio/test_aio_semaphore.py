"""aio.Semaphore and aio.SemaphoreMutex against a real server: the sync semaphore's leases.

At most max_leases holders among sync and asyncio objects on one path; all
or none for several leases; a cancelled wait leaves neither a lease node nor
its internal mutex's node; a lost lease is an event; the mutex form refuses
a task asking twice.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.aio.loops import run_on
from tests.containers import children_of
from zk_recipes import (
    ConfigurationError,
    LockLost,
    RecipeUsageError,
    Semaphore,
    SemaphoreMutex,
    ZkClient,
    aio,
)
from zk_recipes.testing import expire_session, wait_for_children
from zk_recipes.testing.pytest_plugin import ClientFactory

PATH = "/aio/sem"


def test_at_most_max_leases_hold_among_sync_and_asyncio(loop: str, zk_client: ZkClient) -> None:
    sync = Semaphore(zk_client, PATH, 3)

    async def main() -> None:
        sem = aio.Semaphore(zk_client, PATH, 3)
        inside = 0
        most = 0
        go = asyncio.Event()
        two_inside = asyncio.Event()

        async def one() -> int:
            nonlocal inside, most
            async with sem:
                inside += 1
                most = max(most, inside)
                if inside == 2:
                    two_inside.set()
                token = sem.fencing_token
                await go.wait()
                inside -= 1
                return token

        assert await asyncio.to_thread(sync.acquire, True, 5)  # one of the three: a sync holder
        tasks = [asyncio.ensure_future(one()) for _ in range(4)]
        await asyncio.wait_for(two_inside.wait(), 10)
        await asyncio.to_thread(wait_for_children, zk_client, f"{PATH}/leases", 4)
        assert inside == 2  # two leases left for four tasks; the third waits at the limit
        go.set()
        tokens = await asyncio.gather(*tasks)
        assert most == 2
        assert len(set(tokens)) == 4
        await asyncio.to_thread(sync.release)

    run_on(loop, main())
    assert children_of(zk_client, f"{PATH}/leases") == []
    assert children_of(zk_client, f"{PATH}/locks") == []


def test_several_leases_all_or_none(zk_client: ZkClient) -> None:
    async def main() -> None:
        sem = aio.Semaphore(zk_client, PATH, 3)
        two = await sem.acquire_leases(2, timeout=5)
        assert len(two) == 2
        assert await sem.acquire_leases(2, timeout=0.3) == []  # one left: none of two
        assert len(children_of(zk_client, f"{PATH}/leases")) == 2  # nothing left behind
        assert sem.statistics().leases == 2
        await sem.return_leases(two)
        await sem.return_leases(two)  # given back already: nothing to do
        assert sem.leases == []
        with pytest.raises(ConfigurationError, match="between 1 and max_leases"):
            await sem.acquire_leases(4)
        with pytest.raises(RecipeUsageError, match="not held"):
            await sem.release()

    asyncio.run(main())
    assert children_of(zk_client, f"{PATH}/leases") == []


def test_a_cancelled_wait_leaves_no_lease_and_no_mutex_node(
    loop: str, zk_client_factory: ClientFactory
) -> None:
    holder_client, waiter_client = zk_client_factory(), zk_client_factory()
    held = Semaphore(holder_client, PATH, 1)
    assert held.acquire()

    async def main() -> None:
        sem = aio.Semaphore(waiter_client, PATH, 1)
        task = asyncio.ensure_future(sem.acquire())
        await asyncio.to_thread(wait_for_children, holder_client, f"{PATH}/leases", 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(children_of(holder_client, f"{PATH}/leases")) == 1
        assert children_of(holder_client, f"{PATH}/locks") == []
        assert sem.statistics().waiting == 0

    run_on(loop, main())
    held.release()


def test_a_lost_lease_is_an_event(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()

    async def main() -> None:
        sem = aio.Semaphore(client, PATH, 2)
        async with sem:
            await asyncio.to_thread(expire_session, client)
            await asyncio.wait_for(sem.lost.wait(), 10)
            assert not sem.is_held()
            with pytest.raises(LockLost):
                sem.check()

    asyncio.run(main())


def test_the_mutex_form_excludes_the_sync_one_and_refuses_a_second_ask(
    zk_client: ZkClient,
) -> None:
    sync = SemaphoreMutex(zk_client, PATH)

    async def main() -> None:
        mutex = aio.SemaphoreMutex(zk_client, PATH)
        async with mutex:
            assert mutex.is_held()
            assert mutex.node is not None
            assert not await asyncio.to_thread(sync.acquire, True, 0.3)
            with pytest.raises(RecipeUsageError, match="not re-entrant"):
                await mutex.acquire(timeout=1)
        assert await asyncio.to_thread(sync.acquire, True, 5)
        assert not await mutex.acquire(timeout=0.3)
        await asyncio.to_thread(sync.release)
        assert mutex.statistics().timeouts == 1

    asyncio.run(main())


def test_leases_left_open_are_given_back_when_the_loops_tasks_end(
    loop: str, zk_client_factory: ClientFactory
) -> None:
    """asyncio.run ends with bare leases held (two taken at once, one more by another task
    inside `async with`): every lease node is deleted before the loop closes, not when the
    session ends, and the task's own release finds nothing amiss."""
    client, watcher = zk_client_factory(), zk_client_factory()
    errors: list[object] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: errors.append(context))
        sem = aio.Semaphore(client, PATH, 5)
        assert len(await sem.acquire_leases(2, timeout=5)) == 2
        inside = asyncio.Event()

        async def holder() -> None:
            async with sem:
                inside.set()
                await asyncio.Event().wait()  # until asyncio.run cancels it

        task = asyncio.ensure_future(holder())
        await inside.wait()
        assert not task.done()
        assert len(children_of(client, f"{PATH}/leases")) == 3

    run_on(loop, main())
    assert children_of(watcher, f"{PATH}/leases") == []
    assert client.state is not None
    assert client.state.is_connected
    assert errors == []
