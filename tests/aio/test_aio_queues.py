"""aio.SimpleQueue and aio.DistributedQueue on a real server: the sync queues, awaited.

Items cross between sync and asyncio sides exactly once; waiting takes hold
no thread; a cancelled take leaves the item for the others; the async
consumer gets the sync queue's fenced context (its transaction commits with
the item's delete, a raising consumer gets the item again); and an async
consumer handed to a sync queue is refused, never "consumed" unrun.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tests.aio.loops import run_on
from zk_recipes import (
    JSON,
    DistributedQueue,
    ItemContext,
    SimpleQueue,
    WrongTypeError,
    ZkClient,
    ZkTimeoutError,
    aio,
)
from zk_recipes.testing import wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_simple_queue_items_cross_once_and_waiting_takes_hold_no_thread(
    loop: str, zk_client_factory: ClientFactory
) -> None:
    producer = SimpleQueue(zk_client_factory(), "/sq")
    client = zk_client_factory()

    async def main() -> list[bytes]:
        queue = aio.SimpleQueue(client, "/sq")
        assert await queue.poll() is None  # empty: at once
        with pytest.raises(ZkTimeoutError, match=r"within 0\.2 s"):
            await queue.take(timeout=0.2)
        threads = threading.active_count()
        takers = [asyncio.ensure_future(queue.take(timeout=20)) for _ in range(30)]
        await asyncio.sleep(0.2)
        assert threading.active_count() == threads  # thirty waiting takes, no thread
        for n in range(30):
            await asyncio.to_thread(producer.offer, b"item-%02d" % n)
        taken = await asyncio.wait_for(asyncio.gather(*takers), 30)
        await queue.offer(b"mine")
        assert await queue.peek() == b"mine"
        assert await queue.size() == 1
        await queue.close()
        return list(taken)

    taken = run_on(loop, main())
    assert sorted(taken) == [b"item-%02d" % n for n in range(30)]  # each once
    assert producer.take(timeout=5) == b"mine"


def test_a_cancelled_take_leaves_the_item_for_the_others(zk_client_factory: ClientFactory) -> None:
    other = SimpleQueue(zk_client_factory(), "/sq-cancel")

    async def main() -> None:
        queue = aio.SimpleQueue(zk_client_factory(), "/sq-cancel")
        waiting = asyncio.ensure_future(queue.take())
        await asyncio.sleep(0.2)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await queue.offer(b"for someone else")

    asyncio.run(main())
    assert other.take(timeout=5) == b"for someone else"


def test_the_async_consumer_gets_the_fenced_context_and_commits_with_the_item(
    loop: str, zk_client_factory: ClientFactory
) -> None:
    client, checker = zk_client_factory(), zk_client_factory()
    seen: list[tuple[Any, int, int | None]] = []

    async def main() -> None:
        done = asyncio.Event()
        failed_once: set[int] = set()

        async def consume(value: Any, context: ItemContext) -> None:
            assert asyncio.get_running_loop() is main_loop  # awaited on the queue's loop
            if value["n"] == 2 and value["n"] not in failed_once:
                failed_once.add(value["n"])
                raise RuntimeError("the first attempt at item 2 fails")
            await asyncio.sleep(0.01)
            context.transaction().create(f"/dq-done/{value['n']}")
            seen.append((value["n"], context.attempt, context.fencing_token))
            if len(seen) == 4:
                done.set()

        main_loop = asyncio.get_running_loop()
        queue = aio.DistributedQueue(
            client,
            "/dq",
            consume,
            lock_path="/dq-locks",
            serializer=JSON,
            retry_backoff=0.05,
        )
        await asyncio.to_thread(checker.ensure_path, "/dq-done")
        async with queue:
            for n in range(4):
                await queue.put({"n": n})
            await asyncio.wait_for(done.wait(), 30)
        assert await queue.size() == 0

    run_on(loop, main())
    assert sorted(n for n, _, _ in seen) == [0, 1, 2, 3]
    assert dict((n, attempt) for n, attempt, _ in seen)[2] == 2  # tried again
    assert all(token is not None for _, _, token in seen)
    assert sorted(checker.get_children("/dq-done")) == ["0", "1", "2", "3"]
    assert checker.get_children("/dq-locks") == []


def test_a_bounded_put_waits_for_room_on_the_loop(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()

    async def main() -> None:
        bounded: aio.DistributedQueue[bytes] = aio.DistributedQueue(
            client, "/dq-bounded", max_items=1
        )
        async with bounded as queue:
            await queue.put(b"one")
            with pytest.raises(ZkTimeoutError, match="max_items=1"):
                await queue.put(b"two", timeout=0.2)
            waiting = asyncio.ensure_future(queue.put(b"two", timeout=20))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            taken = threading.Event()

            def take_one(value: bytes, context: ItemContext) -> None:
                taken.set()

            with DistributedQueue(zk_client_factory(), "/dq-bounded", take_one):
                await asyncio.wait_for(waiting, 20)  # room made by the sync consumer
                await asyncio.to_thread(wait_until, taken.is_set, "consumed", 10)
            with pytest.raises(WrongTypeError, match="a sequence of items"):
                await queue.put_multi(b"not a list")  # type: ignore[arg-type]

    asyncio.run(main())


def test_an_async_consumer_is_refused_by_the_sync_queue_and_never_consumed_unrun(
    zk_client: ZkClient,
) -> None:
    async def consume(value: bytes, context: ItemContext) -> None:
        pass

    with pytest.raises(WrongTypeError, match=r"coroutine function.*aio\.DistributedQueue"):
        DistributedQueue(zk_client, "/dq-trap", consume)
    with pytest.raises(WrongTypeError, match="must be an async def"):
        aio.DistributedQueue(zk_client, "/dq-trap", lambda value, context: None)  # type: ignore[arg-type,return-value]
    # A plain callable that returns a coroutine slips past the check: its item is a
    # failed attempt (then a dead letter), never committed as consumed.
    with DistributedQueue(
        zk_client,
        "/dq-trap",
        lambda value, context: consume(value, context),
        lock_path="/dq-trap-locks",
        max_attempts=1,
    ) as queue:
        queue.put(b"kept")
        wait_until(lambda: queue.dead_letters(), "the item set aside", 10)
    [dead] = queue.dead_letters()
    assert dead.items == (b"kept",)
    assert "nothing awaits" in dead.last_error
