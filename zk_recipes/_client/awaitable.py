"""The client's requests awaited on an asyncio loop: ``zk.aio.get(...)``, states as an iterator.

Why here: every request already answers with a ``Pending`` completed on the
connection's side; awaiting one needs only a future that its completion
settles on the loop (``call_soon_threadsafe``), no thread per request. The
recipes' asyncio forms (``zk_recipes.aio``) build on ``settle`` and
``LoopWake``.

Timeouts are the sync API's: a request not answered within the client's
``connection_timeout`` raises OperationTimeoutError (it may still be applied,
as in the sync API). Cancelling an awaiting task stops the wait, not the
request: it is on the wire already.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from zk_recipes._client.creates import CreateResult
from zk_recipes._client.kazoo import Pending
from zk_recipes._client.states import ConnectionState, StateChange
from zk_recipes._errors import OperationTimeoutError, RecipeUsageError
from zk_recipes._types import CreateMode, ZnodeStat

if TYPE_CHECKING:
    from zk_recipes._client.states import StateListener
    from zk_recipes._settings import ClientSettings
    from zk_recipes._types import WatchCallback


class _Requests(Protocol):
    """What this module uses of a ZkClient (typed here: the client imports this module)."""

    @property
    def settings(self) -> ClientSettings: ...

    def get_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[tuple[bytes, ZnodeStat]]: ...

    def get_children_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[list[str]]: ...

    def exists_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[ZnodeStat | None]: ...

    def create_async(
        self, path: str, data: bytes = b"", *, mode: CreateMode = CreateMode.PERSISTENT
    ) -> Pending[CreateResult]: ...

    def set_async(self, path: str, data: bytes, version: int = -1) -> Pending[ZnodeStat]: ...

    def delete_async(self, path: str, version: int = -1) -> Pending[None]: ...

    def add_listener(self, listener: StateListener) -> None: ...

    def remove_listener(self, listener: StateListener) -> None: ...


T = TypeVar("T")


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., object], *args: Any) -> None:
    """``loop.call_soon_threadsafe``; nothing when the loop is closed (nobody awaits)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


def settle(pending: Pending[T]) -> asyncio.Future[T]:
    """A future of the running loop that ``pending``'s answer (or failure) completes."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def copy(done: Pending[T]) -> None:
        if future.done():
            return
        try:
            value = done.result_now()
        except BaseException as exc:  # the request's failure, translated
            future.set_exception(exc)
        else:
            future.set_result(value)

    pending.add_done_callback(lambda done: _call_soon(loop, copy, done), inline=True)
    return future


async def answer(pending: Pending[T], timeout: float, what: str) -> T:
    """Await ``pending`` for ``timeout`` seconds; OperationTimeoutError after that.

    Not ``asyncio.wait_for``: before Python 3.12 it swallows a cancellation
    that comes as the answer does (the task goes on as if never cancelled, and
    a recipe's clean-up never hears of it); ``asyncio.wait`` raises it.
    """
    future = settle(pending)
    try:
        done, _ = await asyncio.wait((future,), timeout=timeout)
    except asyncio.CancelledError:
        future.cancel()  # its answer, when it comes, is dropped (a failure unreported)
        raise
    if not done:
        future.cancel()  # a late answer is dropped
        raise OperationTimeoutError(f"no answer to {what} within {timeout:g}s")
    return future.result()


class LoopWake:
    """Completes ``future`` on its loop when ``set()`` (from any thread: a watch, a close)."""

    __slots__ = ("future", "loop")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[None] = self.loop.create_future()

    def set(self) -> None:
        _call_soon(self.loop, self._done)

    def _done(self) -> None:
        if not self.future.done():
            self.future.set_result(None)

    def clear(self) -> None:
        """Ready to be set again (on the loop's thread)."""
        if self.future.done():
            self.future = self.loop.create_future()


class AsyncRequests:
    """``zk.aio``: the client's requests as coroutines (paths as in the sync API)."""

    __slots__ = ("_client",)

    def __init__(self, client: _Requests) -> None:
        self._client = client

    def _timeout(self) -> float:
        return self._client.settings.connection_timeout

    async def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        return await answer(self._client.get_async(path), self._timeout(), f"get {path}")

    async def get_children(self, path: str) -> list[str]:
        pending = self._client.get_children_async(path)
        return await answer(pending, self._timeout(), f"get_children {path}")

    async def exists(self, path: str) -> ZnodeStat | None:
        return await answer(self._client.exists_async(path), self._timeout(), f"exists {path}")

    async def create(
        self, path: str, data: bytes = b"", *, mode: CreateMode = CreateMode.PERSISTENT
    ) -> CreateResult:
        """Create one node (no parents, no TTL: the sync ``create`` has those)."""
        pending = self._client.create_async(path, data, mode=mode)
        return await answer(pending, self._timeout(), f"create {path}")

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        pending = self._client.set_async(path, data, version)
        return await answer(pending, self._timeout(), f"set {path}")

    async def delete(self, path: str, version: int = -1) -> None:
        """Delete one node (not guaranteed: ``ZkClient.delete(guaranteed=True)`` is)."""
        pending = self._client.delete_async(path, version)
        await answer(pending, self._timeout(), f"delete {path}")

    def states(self, *, max_queued: int = 64) -> StateChanges:
        """Each connection state change from now on (heard from this call, not from the
        first ``__anext__``), until the client closes: ``async for change in zk.aio.states()``.

        A consumer slower than the changes sees at most ``max_queued`` of them
        queued; past that the oldest are dropped (the newest state is the one
        that counts). Ends after the client's CLOSED; ``aclose()`` (or ``async
        with``) stops listening earlier. Call it on the loop that iterates.
        """
        return StateChanges(self._client, max_queued)


class StateChanges:
    """An async iterator of a client's state changes (``AsyncRequests.states``)."""

    def __init__(self, client: _Requests, max_queued: int) -> None:
        if max_queued < 1:
            raise RecipeUsageError(f"max_queued must be at least 1, got {max_queued!r}")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RecipeUsageError(
                "zk.aio.states() needs a running event loop: call it from a coroutine"
            ) from None
        self._client = client
        self._max_queued = max_queued
        self._queue: asyncio.Queue[StateChange] = asyncio.Queue()
        self._ended = False

        def heard(change: StateChange) -> None:
            _call_soon(loop, self._put, change)

        self._heard = heard
        client.add_listener(heard)

    def _put(self, change: StateChange) -> None:
        if self._queue.qsize() >= self._max_queued:
            self._queue.get_nowait()
        self._queue.put_nowait(change)

    def __aiter__(self) -> StateChanges:
        return self

    async def __anext__(self) -> StateChange:
        if self._ended:
            raise StopAsyncIteration
        change = await self._queue.get()
        if change.state is ConnectionState.CLOSED:
            await self.aclose()
        return change

    async def aclose(self) -> None:
        """Stop listening (the changes queued are dropped)."""
        self._ended = True
        self._client.remove_listener(self._heard)

    async def __aenter__(self) -> StateChanges:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
