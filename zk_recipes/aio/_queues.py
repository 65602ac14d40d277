"""``aio.SimpleQueue`` and ``aio.DistributedQueue``: the queues awaited, on the sync queues.

Not second queues: each holds the sync queue and awaits its steps.

- Taking (``SimpleQueue.poll/take/peek``) is the sync queue's own steps: the
  listing with its child watch, the read, the delete that decides whose the
  item is (``_queue/deletes.py``); the wait is a future the watch completes
  on the loop, no thread. A cancelled take sends no delete after the cancel;
  one already sent that makes the item ours puts the item back (at the
  tail, logged): it is never lost.
- Putting (``offer``, ``put``) waits for room on the loop (the ``max_items``
  watch) and sends the put's one multi (its marker answers a lost reply) on
  the asyncio pool: a bounded call, once per item.
- ``aio.DistributedQueue``'s consumer is ``async def consumer(value,
  context)``, awaited on the loop that started the queue with the sync
  queue's ``ItemContext`` (its fencing token, ``lost``, ``attempt``, and
  ``transaction()`` committed with the item's delete): the claim, the
  commit, the retries and the dead letters are the sync queue's, on the
  queue's one thread, which waits for each coroutine. If the loop goes away
  under a running item (``asyncio.run`` ended without closing the queue),
  that attempt fails (the item is tried again later, never committed) and
  the queue stops taking: close it first (``async with``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar, overload

from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import Steps, call_step
from zk_recipes._errors import ClientStateError, RecipeUsageError, WrongTypeError
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._queue.consuming import is_async_callable
from zk_recipes._queue.distributed import DistributedQueue as _SyncDistributedQueue
from zk_recipes._queue.items import BYTES, QueueSerializer
from zk_recipes._queue.simple import SimpleQueue as _SyncSimpleQueue
from zk_recipes._queue.taking import PREFIX, ItemContext
from zk_recipes.aio._drive import run_awaited

log = logging.getLogger("zk_recipes.queue")

T = TypeVar("T")
AsyncConsumer = Callable[[T, ItemContext], Awaitable[object]]


class SimpleQueue:
    """Curator's SimpleDistributedQueue for asyncio code: SimpleQueue's twin.

    ``await queue.offer(data) -> str``, ``await queue.take(timeout=None) ->
    bytes`` (ZkTimeoutError after the timeout), ``await queue.poll(timeout=0.0)
    -> bytes | None``, ``await queue.peek()``, ``await queue.size()``, ``await
    queue.close()``. The same nodes, bytes and rules as the sync SimpleQueue
    (and Curator's); a waiting take holds no thread.
    """

    def __init__(self, client: ZkClient, path: str) -> None:
        self._sync = _SyncSimpleQueue(client, path)
        self.client = self._sync.client
        self.path = self._sync.path

    async def offer(self, data: bytes) -> str:
        """Add an item at the tail (exactly once on a lost reply); its node's path."""
        return await run_awaited(call_step(lambda: self._sync.offer(data)), None)

    async def poll(self, timeout: float | None = 0.0) -> bytes | None:
        """Take the head item, waiting up to ``timeout`` s (None: for ever); None if none."""
        cancel = Cancellation()
        steps = self._sync._poll_steps(timeout, cancel)
        return await run_awaited(steps, cancel, self._put_back)

    async def take(self, timeout: float | None = None) -> bytes:
        """Take the head item, waiting for one; ZkTimeoutError after ``timeout`` seconds."""
        found = await self.poll(timeout)
        if found is None:
            raise self._sync._nothing_within(timeout)
        return found

    async def peek(self) -> bytes | None:
        """The head item without taking it; None when the queue is empty."""
        return await run_awaited(self._sync._peek_steps(), None)

    async def size(self) -> int:
        """The items in the queue now."""
        return len(await run_awaited(self._sync._names_steps(None), None))

    async def close(self) -> None:
        """Delete this producer's put marker now (it goes with the session anyway)."""
        await run_awaited(call_step(self._sync.close), None)

    def _put_back(self, data: bytes) -> Steps[str]:
        """A take cancelled after its delete made the item ours: the item goes back."""
        log.warning(
            "a take of the queue %s was cancelled after it took an item: put back at the tail",
            self.path,
        )
        return call_step(lambda: self._sync.offer(data))

    def __repr__(self) -> str:
        return f"<aio.SimpleQueue {self.path}>"


class DistributedQueue(Generic[T]):
    """Curator's DistributedQueue for asyncio code, its consumer a coroutine per item.

    ``aio.DistributedQueue(client, path, consumer=None, *, lock_path=None,
    serializer=BYTES, max_items=None, max_attempts=5, retry_backoff=1.0,
    retry_backoff_max=60.0, batch=1)``; ``async with queue:`` (or ``await
    start()`` and ``await close()``); ``await queue.put(item)``, ``await
    queue.put_multi(items)``; ``await queue.size()``, ``await queue.items()``.
    ``consumer`` is ``async def consume(value, context)``, awaited on the loop
    that started the queue with the sync queue's fenced ``ItemContext`` (see
    the module note). The same nodes and rules as the sync DistributedQueue.
    """

    @overload
    def __init__(
        self: DistributedQueue[bytes],
        client: ZkClient,
        path: str,
        consumer: AsyncConsumer[bytes] | None = None,
        *,
        lock_path: str | None = None,
        max_items: int | None = None,
        max_attempts: int | None = 5,
        retry_backoff: float = 1.0,
        retry_backoff_max: float = 60.0,
        batch: int = 1,
    ) -> None: ...

    @overload
    def __init__(
        self,
        client: ZkClient,
        path: str,
        consumer: AsyncConsumer[T] | None = None,
        *,
        lock_path: str | None = None,
        serializer: QueueSerializer[T],
        max_items: int | None = None,
        max_attempts: int | None = 5,
        retry_backoff: float = 1.0,
        retry_backoff_max: float = 60.0,
        batch: int = 1,
    ) -> None: ...

    def __init__(
        self,
        client: ZkClient,
        path: str,
        consumer: AsyncConsumer[Any] | None = None,
        *,
        lock_path: str | None = None,
        serializer: QueueSerializer[Any] = BYTES,
        max_items: int | None = None,
        max_attempts: int | None = 5,
        retry_backoff: float = 1.0,
        retry_backoff_max: float = 60.0,
        batch: int = 1,
    ) -> None:
        if consumer is not None and not is_async_callable(consumer):
            raise WrongTypeError(
                f"the consumer {consumer!r} of aio.DistributedQueue must be an async def "
                "(async def consume(value, context)); a plain def is the sync "
                "zk_recipes.DistributedQueue's"
            )
        self._consumer = consumer
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sync: _SyncDistributedQueue[Any] = _SyncDistributedQueue(
            client,
            path,
            None if consumer is None else self._bridge,
            lock_path=lock_path,
            serializer=serializer,
            max_items=max_items,
            max_attempts=max_attempts,
            retry_backoff=retry_backoff,
            retry_backoff_max=retry_backoff_max,
            batch=batch,
        )
        self.client = self._sync.client
        self.path = self._sync.path
        self.lock_path = self._sync.lock_path

    # -- lifecycle ---------------------------------------------------------
    async def start(self) -> DistributedQueue[T]:
        """Make the directories and start consuming (on this loop) if there is a consumer."""
        self._loop = asyncio.get_running_loop()
        await run_awaited(call_step(self._sync.start), None)
        return self

    async def close(self, timeout: float = 30.0) -> None:
        """Stop consuming: the item in progress is finished first (up to ``timeout``)."""
        await run_awaited(call_step(lambda: self._sync.close(timeout)), None)

    async def __aenter__(self) -> DistributedQueue[T]:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- putting -------------------------------------------------------------
    async def put(self, item: T, *, timeout: float | None = None) -> str:
        """Put one item; with ``max_items``, wait on the loop up to ``timeout`` for room."""
        return await self.put_multi([item], timeout=timeout)

    async def put_multi(self, items: Sequence[T], *, timeout: float | None = None) -> str:
        """Put ``items`` as one node (consumed one by one, in order); returns its path."""
        sync = self._sync
        data = sync._node_bytes(items)  # bad items refused before any wait
        await run_awaited(sync._room_steps(timeout), None)
        return await run_awaited(call_step(lambda: sync._send_node(data, PREFIX)), None)

    # -- reading without consuming -------------------------------------------
    async def size(self) -> int:
        """The nodes in the queue (a ``put_multi`` node counts once)."""
        return len(await run_awaited(self._sync._names_steps(None), None))

    async def items(self) -> list[T]:
        """Every item now in the queue, in order, without consuming."""
        return await run_awaited(call_step(self._sync.items), None)

    # -- the consumer, on the sync queue's thread ----------------------------
    def _bridge(self, value: Any, context: ItemContext) -> None:
        """Await the coroutine on the queue's loop; this thread waits for its end."""
        loop, consumer = self._loop, self._consumer
        assert consumer is not None
        if loop is None or loop.is_closed():
            self._stop_taking()
            raise ClientStateError(f"the loop of the queue {self.path} is gone: not consumed")
        try:
            future = asyncio.run_coroutine_threadsafe(_awaited(consumer(value, context)), loop)
        except RuntimeError:  # the loop closed in between
            self._stop_taking()
            raise ClientStateError(
                f"the loop of the queue {self.path} is gone: not consumed"
            ) from None
        try:
            future.result()
        except concurrent.futures.CancelledError:
            self._stop_taking()  # the loop's tasks are ending: no more items
            raise RecipeUsageError(
                f"the consumer of {self.path} was cancelled (its loop ended with the queue "
                "open: close the queue first): not consumed"
            ) from None

    def _stop_taking(self) -> None:
        self._sync._stop.set()
        self._sync._wake.set()

    def __repr__(self) -> str:
        return f"<aio.DistributedQueue {self.path}>"


async def _awaited(awaitable: Awaitable[object]) -> object:
    return await awaitable
