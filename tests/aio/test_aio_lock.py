"""aio.Lock against a real server: the sync Lock's queue awaited, cancellation, loss, no threads.

Each test runs its coroutines with ``asyncio.run`` (no asyncio test plugin):
the loop lives and dies inside the test, as in a user's program.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.aio.loops import run_on
from tests.containers import children_of
from zk_recipes import (
    ClientStateError,
    ConnectionState,
    Lock,
    LockLost,
    RecipeUsageError,
    ZkClient,
    aio,
)
from zk_recipes.testing import ZooKeeperServer, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_acquire_hold_and_release_leave_nothing(loop: str, zk_client: ZkClient) -> None:
    async def main() -> None:
        lock = aio.Lock(zk_client, "/aio/basic", identifier="job-1")
        async with lock:
            assert lock.is_held()
            lock.check()
            assert lock.fencing_token == zk_client.get(lock.node or "")[1].czxid
            assert [c.owner.id for c in Lock(zk_client, "/aio/basic").contenders()] == ["job-1"]
        assert not lock.is_held()
        assert lock.node is None
        assert await lock.acquire(blocking=False)  # free: taken at once
        assert not await aio.Lock(zk_client, "/aio/basic").acquire(blocking=False)
        await lock.release()

    run_on(loop, main())
    assert children_of(zk_client, "/aio/basic") == []


def test_it_excludes_a_sync_lock_on_the_same_path_both_ways(
    zk_client_factory: ClientFactory,
) -> None:
    sync_lock = Lock(zk_client_factory(), "/aio/shared")
    holder = zk_client_factory()

    async def main() -> None:
        lock = aio.Lock(holder, "/aio/shared")
        assert sync_lock.acquire()
        assert not await lock.acquire(timeout=0.3)
        assert lock.statistics().refusal == "held"
        releasing = threading.Timer(0.2, sync_lock.release)
        releasing.start()
        assert await lock.acquire(timeout=10)  # the watch on the sync holder's node wakes us
        assert not await asyncio.to_thread(sync_lock.acquire, timeout=0.3)
        await lock.release()
        assert await asyncio.to_thread(sync_lock.acquire, timeout=5)
        sync_lock.release()

    asyncio.run(main())


def test_many_coroutines_take_turns_without_overlap_on_a_handful_of_threads(
    loop: str,
    zk_client: ZkClient,
) -> None:
    """A hundred contenders (an object each) on one path: one at a time, every one served.

    The threads of the process grow by the pool's size at most (``POOL_THREADS``),
    not by one per waiter.
    """
    contenders = 100
    before = threading.active_count()
    inside: list[int] = []
    overlaps: list[int] = []
    tokens: list[int] = []
    most_threads = [before]

    async def one(index: int) -> None:
        lock = aio.Lock(zk_client, "/aio/many")
        async with lock:
            inside.append(index)
            if len(inside) > 1:
                overlaps.append(index)
            tokens.append(lock.fencing_token)
            most_threads[0] = max(most_threads[0], threading.active_count())
            await asyncio.sleep(0)
            inside.remove(index)

    async def main() -> None:
        await asyncio.gather(*(one(index) for index in range(contenders)))

    run_on(loop, main())
    assert overlaps == []
    assert len(tokens) == contenders
    assert tokens == sorted(tokens)  # a fair queue: in the order they entered it
    assert most_threads[0] <= before + aio.POOL_THREADS
    assert children_of(zk_client, "/aio/many") == []


def _cancel_task(task: asyncio.Task[Any]) -> Awaitable[None]:
    async def cancel() -> None:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    return cancel()


async def _timeout(waiter: Callable[[], Awaitable[bool]]) -> None:
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout is Python 3.11's")
    else:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await waiter()


async def _wait_for(waiter: Callable[[], Awaitable[bool]]) -> None:
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(waiter(), 0.5)


@pytest.mark.parametrize("how", ["task.cancel", "asyncio.timeout", "wait_for"])
def test_a_cancelled_wait_deletes_its_node_before_the_cancellation_goes_on(
    loop: str, zk_client_factory: ClientFactory, how: str
) -> None:
    holder_client, waiter_client = zk_client_factory(), zk_client_factory()
    held = Lock(holder_client, "/aio/cancel")
    assert held.acquire()

    async def main() -> None:
        lock = aio.Lock(waiter_client, "/aio/cancel")
        if how == "task.cancel":
            task = asyncio.ensure_future(lock.acquire())
            await asyncio.to_thread(
                wait_until, lambda: len(children_of(holder_client, "/aio/cancel")) == 2, "queued"
            )
            await _cancel_task(task)
        elif how == "asyncio.timeout":
            await _timeout(lock.acquire)
        else:
            await _wait_for(lock.acquire)
        # Gone by the time the cancellation reached us: only the holder is queued.
        assert children_of(holder_client, "/aio/cancel") == [str(held.node).rsplit("/", 1)[1]]
        assert not lock.is_held()
        assert lock.statistics().refusal == "cancelled"  # not "held": not a refusal
        # The object is usable again once the holder lets go.
        held.release()
        assert await lock.acquire(timeout=10)
        await lock.release()

    run_on(loop, main())
    assert children_of(holder_client, "/aio/cancel") == []


def test_coroutines_sharing_one_object_queue_locally(zk_client: ZkClient) -> None:
    lock = aio.Lock(zk_client, "/aio/local")
    order: list[int] = []

    async def one(index: int) -> None:
        async with lock:
            assert len(children_of(zk_client, "/aio/local")) == 1  # one contender per object
            order.append(index)
            await asyncio.sleep(0.01)

    async def main() -> None:
        await asyncio.gather(*(one(index) for index in range(5)))
        async with lock:
            assert not await asyncio.wait_for(asyncio.shield(lock.acquire(blocking=False)), 5)

    asyncio.run(main())
    assert sorted(order) == list(range(5))


def test_the_loss_of_a_hold_is_an_event_the_coroutine_can_await(
    loop: str, zk_client_factory: ClientFactory, zk_hosts: str
) -> None:
    client = zk_client_factory(session_timeout=3.0)

    async def main() -> None:
        lock = aio.Lock(client, "/aio/lost")
        await lock.acquire()
        await asyncio.to_thread(expire_session, client, hosts=zk_hosts)
        await asyncio.wait_for(lock.lost.wait(), 20)
        with pytest.raises(LockLost):
            lock.check()
        await lock.release()  # forgets it locally; never deletes a node not ours
        assert await lock.acquire(timeout=20)  # the new session queues again
        assert not lock.lost.is_set()
        await lock.release()

    run_on(loop, main())


def test_no_step_blocks_the_loop_in_debug_mode(
    zk_client_factory: ClientFactory, zk_server: ZooKeeperServer, caplog: pytest.LogCaptureFixture
) -> None:
    """asyncio's debug mode names every callback that ran 50 ms or more: none may,
    through hand-offs, a cut connection and the reconnect.

    A callback's time is wall time, so a loaded machine that descheduled the
    loop's thread shows one now and then: the scenario runs up to three times
    and one clean run passes. A call that blocks (a round trip, a wait for the
    connection) would show in every run.
    """
    proxy = zk_server.proxy()
    zk_client = zk_client_factory(hosts=proxy.connect_string)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.slow_callback_duration = 0.05
        other = aio.Lock(zk_client, "/aio/debug")
        lock = aio.Lock(zk_client, "/aio/debug")
        for _ in range(5):
            async with other:
                waiter = asyncio.ensure_future(lock.acquire())
                await asyncio.sleep(0.05)
            assert await waiter
            await lock.release()
        heard = []
        async with lock, zk_client.aio.states() as states:
            await asyncio.to_thread(proxy.cut)  # the harness's call blocks, not ours
            async for change in states:
                heard.append(change.state)
                if change.state is ConnectionState.SUSPENDED:
                    await asyncio.to_thread(proxy.heal)
                if change.state.is_connected:
                    break
            lock.check()
        assert heard == [ConnectionState.SUSPENDED, ConnectionState.RECONNECTED]

    runs: list[list[str]] = []
    try:
        for _ in range(3):
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="asyncio"):
                asyncio.run(main(), debug=True)
            runs.append([r.getMessage() for r in caplog.records if "took" in r.getMessage()])
            if not runs[-1]:
                break
    finally:
        proxy.close()
    assert [] in runs, runs


def test_one_object_serves_one_loop_and_a_closed_client_is_refused(
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory()
    lock = aio.Lock(client, "/aio/loops")

    async def once() -> None:
        async with lock:
            pass

    asyncio.run(once())
    with pytest.raises(RecipeUsageError, match="event loop"):
        asyncio.run(once())
    client.close()
    with pytest.raises(ClientStateError):
        asyncio.run(aio.Lock(client, "/aio/loops").acquire())


def test_the_clients_requests_awaited(zk_client: ZkClient) -> None:
    async def main() -> None:
        made = await zk_client.aio.create("/aio-node", b"one")
        assert made.path == "/aio-node"
        data, stat = await zk_client.aio.get("/aio-node")
        assert (data, stat.version) == (b"one", 0)
        assert (await zk_client.aio.set("/aio-node", b"two")).version == 1
        assert await zk_client.aio.get_children("/") == ["aio-node"]
        await zk_client.aio.delete("/aio-node")
        assert await zk_client.aio.exists("/aio-node") is None

    asyncio.run(main())


def test_a_wait_rides_out_a_cut_connection(
    loop: str, zk_client_factory: ClientFactory, zk_server: ZooKeeperServer
) -> None:
    """Cut while queued: the wait goes on once connected again, and the turn still comes."""
    proxy = zk_server.proxy()
    waiter_client = zk_client_factory(hosts=proxy.connect_string)
    holder = Lock(zk_client_factory(), "/aio/cut")
    assert holder.acquire()

    async def main() -> None:
        lock = aio.Lock(waiter_client, "/aio/cut")
        waiting = asyncio.ensure_future(lock.acquire(timeout=30))
        await asyncio.to_thread(
            wait_until, lambda: len(children_of(holder.client, "/aio/cut")) == 2, "queued"
        )
        await asyncio.to_thread(proxy.cut)
        await asyncio.sleep(0.3)
        await asyncio.to_thread(proxy.heal)
        await asyncio.to_thread(holder.release)
        assert await waiting
        lock.check()
        await lock.release()

    try:
        run_on(loop, main())
    finally:
        proxy.close()
    assert children_of(holder.client, "/aio/cut") == []


def test_closing_the_client_ends_a_wait_with_a_clear_error_and_no_node(
    zk_client_factory: ClientFactory,
) -> None:
    holder = Lock(zk_client_factory(), "/aio/close")
    assert holder.acquire()
    waiter_client = zk_client_factory()

    async def main() -> None:
        lock = aio.Lock(waiter_client, "/aio/close")
        waiting = asyncio.ensure_future(lock.acquire())
        await asyncio.to_thread(
            wait_until, lambda: len(children_of(holder.client, "/aio/close")) == 2, "queued"
        )
        await asyncio.to_thread(waiter_client.close)
        with pytest.raises(ClientStateError):
            await asyncio.wait_for(waiting, 10)

    asyncio.run(main())
    # The closed session took our node with it: only the holder is left.
    assert children_of(holder.client, "/aio/close") == [str(holder.node).rsplit("/", 1)[1]]
    holder.release()


def test_a_sync_call_on_the_loop_is_named_in_debug_mode_only(zk_client: ZkClient) -> None:
    """A sync call from a coroutine blocks the loop: debug mode says so, and how to avoid it."""
    zk_client.create("/sync-on-loop")

    async def main() -> None:
        with pytest.warns(RuntimeWarning, match=r"blocks the running asyncio event loop.*aio"):
            zk_client.get("/sync-on-loop")
        with pytest.warns(RuntimeWarning) as told:
            Lock(zk_client, "/aio/sync-on-loop").acquire(timeout=5)
        assert any("acquire_steps" in str(w.message) for w in told), [str(w.message) for w in told]

    asyncio.run(main(), debug=True)

    async def quiet() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            zk_client.get("/sync-on-loop")  # not in debug mode: nothing said

    asyncio.run(quiet())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zk_client.get("/sync-on-loop")  # no loop: nothing said


def test_a_task_taking_a_lock_it_holds_is_told_and_an_rlock_counts(zk_client: ZkClient) -> None:
    """Never a wait for itself: aio.Lock refuses re-entry; aio.RLock counts it, per task."""

    async def main() -> None:
        lock = aio.Lock(zk_client, "/aio/reentry")
        async with lock:
            with pytest.raises(RecipeUsageError, match="not re-entrant"):
                await lock.acquire(timeout=5)  # the same task: raises, never waits
        rlock = aio.RLock(zk_client, "/aio/reentry")
        async with rlock:
            token = rlock.fencing_token
            async with rlock:  # the same task: a count, no request
                assert rlock.statistics().depth == 2
                assert rlock.fencing_token == token

            async def other_task_releases() -> None:
                await rlock.release()

            with pytest.raises(RecipeUsageError, match="only the holding task"):
                await asyncio.ensure_future(other_task_releases())

            async def take_and_let_go() -> None:
                assert await rlock.acquire(timeout=10)
                await rlock.release()

            other = asyncio.ensure_future(take_and_let_go())  # another task waits its turn
            await asyncio.sleep(0.2)
            assert not other.done()
        await asyncio.wait_for(other, 10)
        assert children_of(zk_client, "/aio/reentry") == []

    asyncio.run(main())


def test_holds_left_open_are_released_when_the_loops_tasks_end(
    loop: str, zk_client_factory: ClientFactory
) -> None:
    """asyncio.run ends with a bare acquire still held and a task inside `async with`: both
    nodes are deleted before the loop closes (not when the session ends), and the task's own
    release is not taken from it (no "not held" error)."""
    client, watcher = zk_client_factory(), zk_client_factory()
    errors: list[dict[str, Any]] = []

    async def main() -> tuple[str, str]:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: errors.append(context))
        bare = aio.RLock(client, "/aio/left-open/bare")
        assert await bare.acquire()
        assert await bare.acquire()  # re-entered: released all the same
        inside = asyncio.Event()
        block = aio.Lock(client, "/aio/left-open/block")

        async def holder() -> None:
            async with block:
                inside.set()
                await asyncio.Event().wait()  # until asyncio.run cancels it

        task = asyncio.ensure_future(holder())
        await inside.wait()
        assert not task.done()
        return str(bare.node), str(block.node)

    nodes = run_on(loop, main())
    assert [watcher.exists(node) for node in nodes] == [None, None]
    assert client.state is ConnectionState.CONNECTED  # released, not ended with the session
    assert errors == []


def test_holding_adds_no_task_and_a_loop_with_nothing_held_has_nothing_of_ours(
    zk_client: ZkClient,
) -> None:
    """The loop-end release is an async generator the loop's end closes, started with the
    first hold and finished in place with the last: no task, and nothing left after."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        lock = aio.Lock(zk_client, "/aio/no-keeper")
        tasks = asyncio.all_tasks()
        async with lock:
            assert asyncio.all_tasks() == tasks
            held = len(loop._asyncgens)  # type: ignore[attr-defined]
        assert asyncio.all_tasks() == tasks
        assert held == 1
        assert len(loop._asyncgens) == 0  # type: ignore[attr-defined]

    asyncio.run(main())


def test_a_timeout_of_0_on_a_free_lock_takes_it(zk_client: ZkClient) -> None:
    """A timeout of 0 still gets its try in ZooKeeper (asyncio.wait_for(..., 0) never runs the
    local gate's acquire, which made a free lock look busy)."""

    async def main() -> None:
        lock = aio.Lock(zk_client, "/aio/zero")
        assert await lock.acquire(timeout=0)
        await lock.release()
        sem = aio.Semaphore(zk_client, "/aio/zero-sem", 1)
        assert await sem.acquire(timeout=0)
        await sem.release()

    asyncio.run(main())


def test_a_cancel_that_comes_as_the_local_turn_does_is_never_lost(zk_client: ZkClient) -> None:
    """The waiter's turn on the local gate and its cancel in the same loop pass: the
    CancelledError is raised (``asyncio.wait_for`` before Python 3.12 swallowed it and the
    cancelled task went on to take the lock), and the gate is free again."""

    async def main() -> None:
        lock = aio.Lock(zk_client, "/aio/turn-and-cancel")
        assert await lock.acquire()
        waiter = asyncio.ensure_future(lock.acquire(timeout=10))
        await asyncio.sleep(0.05)  # the waiter is on the local gate
        gate = lock._gate
        assert gate is not None
        release = gate.release

        def release_then_cancel() -> None:
            release()  # the waiter's turn is scheduled ...
            waiter.cancel()  # ... and its cancel, in the same pass

        gate.release = release_then_cancel  # type: ignore[method-assign]
        await lock.release()
        gate.release = release  # type: ignore[method-assign]
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert not lock.is_held()
        assert children_of(zk_client, "/aio/turn-and-cancel") == []
        assert await lock.acquire(timeout=5)  # the gate was given back
        await lock.release()

    asyncio.run(main())
