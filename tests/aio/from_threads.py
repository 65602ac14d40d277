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

from zk_recipes import Contender, Lock, LockStatistics, ZkClient, aio
from zk_recipes._internals.locklike import LockVerbs

T = TypeVar("T")


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
        self._tasks: set[asyncio.Task[bool]] = set()
        self._mutex = self._lock._inner  # the hold the sync and asyncio forms share
        self.lost = self._mutex.lost

    @staticmethod
    async def _make(client: ZkClient, path: str) -> aio.Lock:
        return aio.Lock(client, path)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        done: concurrent.futures.Future[bool] = concurrent.futures.Future()

        def start() -> None:
            task = self._loop.create_task(self._lock.acquire(timeout=timeout, blocking=blocking))
            with self._guard:
                self._tasks.add(task)
            task.add_done_callback(finished)

        def finished(task: asyncio.Task[bool]) -> None:
            with self._guard:
                self._tasks.discard(task)
            if task.cancelled():
                done.set_result(False)  # cancelled: its node was deleted before this
            elif (failure := task.exception()) is not None:
                done.set_exception(failure)
            else:
                done.set_result(task.result())

        self._loop.call_soon_threadsafe(start)
        return done.result()

    def release(self) -> None:
        self._run(self._lock.release())

    def cancel(self) -> None:
        with self._guard:
            tasks = list(self._tasks)
        for task in tasks:
            self._loop.call_soon_threadsafe(task.cancel)

    def is_held(self) -> bool:
        return self._lock.is_held()

    def check(self) -> None:
        self._lock.check()

    @property
    def fencing_token(self) -> int:
        return self._lock.fencing_token

    def on_lost(self, callback: Callable[[Any], object]) -> None:
        self._mutex.on_lost(lambda _mutex: callback(self))

    @property
    def node(self) -> str | None:
        return self._lock.node

    def statistics(self) -> LockStatistics:
        return self._lock.statistics()

    def contenders(self) -> list[Contender]:
        return Lock(self._mutex.client, self.path).contenders()

    def __repr__(self) -> str:
        return f"<from threads {self._lock!r}>"
