"""``aio.Lock`` behind the LockLike contract, so the sync suites run against it unchanged.

Each object runs an event loop on a thread of its own; ``acquire()`` and
``release()`` submit the coroutines to it and wait. ``cancel()`` cancels the
tasks of the acquires under way: the asyncio way, so the contract's "a
cancelled waiter leaves no node" checks the driver's cancellation. What is
not a coroutine (``is_held``, ``check``, ``fencing_token``, ``lost``,
``on_lost``, ``contenders``) is the asyncio form's own, or the hold it shares
with the sync Lock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from zk_recipes import (
    Contender,
    Lock,
    LockStatistics,
    ReadWriteLock,
    SemaphoreMutex,
    ZkClient,
    aio,
)
from zk_recipes._internals.locklike import LockVerbs

T = TypeVar("T")


class _Actor:
    """One calling thread's task on the loop: the thread's calls run in it, one at a time.

    A re-entrant asyncio lock belongs to a task as a sync one belongs to a
    thread, so each thread of the contract gets one task for all its calls.
    A cancel is for the acquire this task runs; one that comes while the
    acquire is still queued (posted, not started) ends it too, unstarted.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.calls: asyncio.Queue[tuple[Callable[[], Coroutine[Any, Any, Any]], Any]] = (
            asyncio.Queue()
        )
        self.acquiring = False  # an acquire is queued or running
        self.running = False  # ... and running: cancel the task
        self.cancel_queued = False  # ... and not started yet: end it unstarted
        self.task = loop.create_task(self._run())

    def cancel(self) -> None:
        if not self.acquiring:
            return
        if self.running:
            self.task.cancel()
        else:
            self.cancel_queued = True

    async def _run(self) -> None:
        while True:
            call, done = await self.calls.get()
            if self.acquiring and self.cancel_queued:
                self.acquiring = self.cancel_queued = False
                done.set_result(False)  # cancelled before it began: nothing to withdraw
                continue
            self.running = True
            try:
                done.set_result(await call())
            except asyncio.CancelledError:
                done.set_result(False)  # an acquire cancelled: its node was deleted first
            except BaseException as exc:  # handed to the calling thread
                done.set_exception(exc)
            finally:
                self.acquiring = self.running = self.cancel_queued = False


class AioLockFromThreads(LockVerbs):
    """An ``aio.Lock`` driven from threads (see the module note)."""

    def __init__(self, client: ZkClient, path: str) -> None:
        self.path = path
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"aio lock {path}", daemon=True
        )
        self._thread.start()
        self._lock = self._run(self._make(client, path))
        self._guard = threading.Lock()
        self._actors: dict[int, _Actor] = {}
        self._client = client
        self._mutex = self._sync_side()  # the hold the sync and asyncio forms share
        self.lost = self._mutex.lost

    @staticmethod
    async def _make(client: ZkClient, path: str) -> Any:
        return aio.Lock(client, path)

    def _sync_side(self) -> Any:
        """The sync recipe under the asyncio form: its ``lost`` event and ``on_lost``."""
        return self._lock._inner

    def _sync_twin(self) -> Any:
        """A sync object of the same recipe on the path, to list its contenders."""
        return Lock(self._client, self.path)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _in_my_task(
        self, call: Callable[[], Coroutine[Any, Any, T]], *, acquiring: bool = False
    ) -> T:
        """``call()`` awaited in the calling thread's task (made on its first call)."""
        me = threading.get_ident()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def submit() -> None:
            with self._guard:
                actor = self._actors.get(me)
                if actor is None:
                    actor = self._actors[me] = _Actor(self._loop)
            actor.acquiring = acquiring
            actor.calls.put_nowait((call, done))

        self._loop.call_soon_threadsafe(submit)
        return done.result()

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        return self._in_my_task(  # type: ignore[no-any-return]
            lambda: self._lock.acquire(timeout=timeout, blocking=blocking), acquiring=True
        )

    def release(self) -> None:
        self._in_my_task(self._lock.release)

    def cancel(self) -> None:
        """Cancel the acquires under way, the asyncio way (``task.cancel()``)."""

        def cancel_acquires() -> None:
            with self._guard:
                actors = list(self._actors.values())
            for actor in actors:
                actor.cancel()

        self._loop.call_soon_threadsafe(cancel_acquires)

    def is_held(self) -> bool:
        return bool(self._lock.is_held())

    def check(self) -> None:
        self._lock.check()

    @property
    def fencing_token(self) -> int:
        return int(self._lock.fencing_token)

    def on_lost(self, callback: Callable[[Any], object]) -> None:
        self._mutex.on_lost(lambda _recipe: callback(self))

    @property
    def node(self) -> str | None:
        node: str | None = self._lock.node
        return node

    def statistics(self) -> LockStatistics:
        statistics: LockStatistics = self._lock.statistics()
        return statistics

    def contenders(self) -> list[Contender]:
        contenders: list[Contender] = self._sync_twin().contenders()
        return contenders

    def __repr__(self) -> str:
        return f"<from threads {self._lock!r}>"


class AioWriteLockFromThreads(AioLockFromThreads):
    """``aio.ReadWriteLock(...).write_lock`` behind the LockLike contract."""

    @staticmethod
    async def _make(client: ZkClient, path: str) -> Any:
        return aio.ReadWriteLock(client, path).write_lock

    def _sync_twin(self) -> Any:
        return ReadWriteLock(self._client, self.path).write_lock


class AioSemaphoreMutexFromThreads(AioLockFromThreads):
    """``aio.SemaphoreMutex`` behind the LockLike contract."""

    @staticmethod
    async def _make(client: ZkClient, path: str) -> Any:
        return aio.SemaphoreMutex(client, path)

    def _sync_side(self) -> Any:
        return self._lock._semaphore._sync  # the sync Semaphore whose leases it holds

    def _sync_twin(self) -> Any:
        return SemaphoreMutex(self._client, self.path)


class AioMultiLockFromThreads(AioLockFromThreads):
    """``aio.MultiLock([aio.Lock])`` behind the LockLike contract (its member's node and queue)."""

    @staticmethod
    async def _make(client: ZkClient, path: str) -> Any:
        return aio.MultiLock([aio.Lock(client, path)])

    def _sync_side(self) -> Any:
        return self._lock.locks[0]._inner  # the member's hold, shared with the sync Lock

    @property
    def node(self) -> str | None:
        node: str | None = self._lock.locks[0].node
        return node
