"""aio.MultiLock against a real server: the sync MultiLock's order, all or none, awaited.

Its members are the asyncio forms; it shares the sync MultiLock's one global
order, so asyncio and sync MultiLocks listing the same paths differently never
deadlock; a timed-out or cancelled acquire leaves no member held and no node;
a member lost while held sets ``lost``; a mix of sync and asyncio members is
refused with the form to use. (The lock contract suite runs it too:
tests/locks/test_lock_contract.py.)
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.aio.loops import run_on
from tests.containers import children_of
from zk_recipes import (
    ConfigurationError,
    Lock,
    LockLost,
    MultiLock,
    RecipeUsageError,
    WrongTypeError,
    ZkClient,
    aio,
)
from zk_recipes.testing import expire_session, wait_for_children
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_asyncio_and_sync_multilocks_in_any_list_order_never_deadlock_or_overlap(
    loop: str, zk_client_factory: ClientFactory
) -> None:
    sync_client, aio_client = zk_client_factory(), zk_client_factory()
    inside = 0
    overlaps = 0
    guard = threading.Lock()

    def enter() -> None:
        nonlocal inside, overlaps
        with guard:
            inside += 1
            overlaps += inside > 1

    def leave() -> None:
        nonlocal inside
        with guard:
            inside -= 1

    def sync_side() -> None:
        # Listed b, a: taken a, b all the same (the one global order).
        multi = MultiLock([Lock(sync_client, "/ml/b"), Lock(sync_client, "/ml/a")])
        for _ in range(8):
            with multi:
                enter()
                leave()

    async def main() -> list[int]:
        thread = asyncio.ensure_future(asyncio.to_thread(sync_side))
        tokens: list[int] = []

        async def one(first: str, second: str) -> None:
            multi = aio.MultiLock([aio.Lock(aio_client, first), aio.Lock(aio_client, second)])
            for _ in range(4):
                async with multi:
                    enter()
                    tokens.append(multi.fencing_token)
                    assert set(multi.fencing_tokens) == {
                        f"{aio_client.namespace}/ml/a",
                        f"{aio_client.namespace}/ml/b",
                    }
                    await asyncio.sleep(0.002)
                    leave()

        await asyncio.wait_for(
            asyncio.gather(one("/ml/a", "/ml/b"), one("/ml/b", "/ml/a"), thread), 60
        )
        return tokens

    tokens = run_on(loop, main())
    assert overlaps == 0
    assert len(tokens) == 8
    assert children_of(aio_client, "/ml/a") == children_of(aio_client, "/ml/b") == []


def test_a_member_not_acquired_in_time_leaves_the_others_released(
    zk_client_factory: ClientFactory,
) -> None:
    client, other = zk_client_factory(), zk_client_factory()
    blocker = Lock(other, "/ml/y")
    assert blocker.acquire(timeout=5)

    async def main() -> None:
        first = aio.Lock(client, "/ml/x")
        semaphore = aio.Semaphore(client, "/ml/z", 2)
        multi = aio.MultiLock([semaphore, aio.Lock(client, "/ml/y"), first])
        assert not await multi.acquire(timeout=0.5)
        assert not multi.is_held()
        assert not first.is_held()
        assert not semaphore.is_held()
        assert not await multi.acquire(blocking=False)
        assert multi.statistics().timeouts == 2

    asyncio.run(main())
    assert children_of(client, "/ml/x") == []
    assert children_of(client, "/ml/y") == [blocker.node.rsplit("/", 1)[1]]  # type: ignore[union-attr]
    assert children_of(client, "/ml/z/leases") == []
    blocker.release()


def test_a_cancelled_acquire_releases_what_it_took_and_leaves_no_node(
    zk_client_factory: ClientFactory,
) -> None:
    client, other = zk_client_factory(), zk_client_factory()
    blocker = Lock(other, "/ml/q/2")
    assert blocker.acquire(timeout=5)

    async def main() -> None:
        first = aio.Lock(client, "/ml/q/1")
        multi = aio.MultiLock([aio.Lock(client, "/ml/q/2"), first])
        waiting = asyncio.ensure_future(multi.acquire())
        # Queued behind the blocker on /ml/q/2, holding /ml/q/1.
        await asyncio.to_thread(wait_for_children, client, "/ml/q/2", 2)
        assert first.is_held()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not first.is_held()  # released before the CancelledError came out
        assert children_of(client, "/ml/q/1") == []
        assert len(children_of(client, "/ml/q/2")) == 1  # the blocker's only

    asyncio.run(main())
    blocker.release()


def test_a_member_lost_while_held_sets_lost_and_check_raises(
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory()

    async def main() -> None:
        rw = aio.ReadWriteLock(client, "/ml/rw")
        multi = aio.MultiLock([aio.Lock(client, "/ml/m"), rw.read_lock])
        async with multi:
            assert multi.is_held()
            assert not multi.lost.is_set()
            multi.check()
            await asyncio.to_thread(expire_session, client)
            await asyncio.wait_for(multi.lost.wait(), 10)
            assert not multi.is_held()
            with pytest.raises(LockLost):
                multi.check()
            assert "LOST" in repr(multi)
        async with multi:  # taken again on the new session: lost is cleared
            assert multi.is_held()
            assert not multi.lost.is_set()

    asyncio.run(main())


def test_bad_input_and_misuse_are_refused_with_what_to_do(zk_client: ZkClient) -> None:
    with pytest.raises(WrongTypeError, match=r"a sync lock.*use MultiLock"):
        aio.MultiLock([Lock(zk_client, "/ml/s")])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="at least one lock"):
        aio.MultiLock([])
    with pytest.raises(WrongTypeError, match="lacks"):
        aio.MultiLock([object()])  # type: ignore[list-item]

    async def main() -> None:
        with pytest.raises(WrongTypeError, match=r"an asyncio lock.*aio\.MultiLock"):
            MultiLock([aio.Lock(zk_client, "/ml/s")])  # type: ignore[list-item]
        with pytest.raises(ConfigurationError, match="same path"):
            aio.MultiLock([aio.Lock(zk_client, "/ml/s"), aio.RLock(zk_client, "/ml/s")])
        multi = aio.MultiLock([aio.Lock(zk_client, "/ml/s")])
        with pytest.raises(RecipeUsageError, match="not held"):
            multi.check()
        with pytest.raises(RecipeUsageError, match="not held by this task"):
            await multi.release()
        async with multi:
            with pytest.raises(RecipeUsageError, match="not re-entrant"):
                await multi.acquire(timeout=1)
            with pytest.raises(RecipeUsageError, match="not held by this task"):
                await asyncio.ensure_future(multi.release())  # another task
        assert children_of(zk_client, "/ml/s") == []

    asyncio.run(main())
