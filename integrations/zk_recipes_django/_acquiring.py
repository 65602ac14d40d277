"""Taking the lock of one call: on the calling thread, or on a thread of its own for async code.

Async code waits on a daemon thread of its own, one per waiting call, not on
the loop's default executor. A long wait must not take a slot that
``sync_to_async`` and the releases need (waiters filling the executor would
keep the holder from releasing), nor hold up interpreter exit.

Cancellation: when the awaiting task is cancelled, the acquire is called off
(``Lock.cancel()``) and the task waits for the thread to end, then releases
what the thread got, so no node outlives the cancellation. ``Lock.cancel()``
ends only acquires already waiting, and the thread may be a few steps short
of its acquire when it comes, so the call-off is repeated until the thread
ends. A release is waited for the same way: a cancellation never cuts it short.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from zk_recipes import Lock
from zk_recipes.cli import lock_path
from zk_recipes_django import _settings
from zk_recipes_django._clients import get_client

T = TypeVar("T")

#: Seconds between repeated ``Lock.cancel()`` calls for a cancelled async waiter
#: whose thread had not reached its acquire when the first one came.
RECALL = 0.05


class Target:
    """The lock of one call: where its nodes go, whom they name, how long to wait."""

    def __init__(self, name: str, alias: str, identifier: str | None, timeout: float | None):
        self.name = name
        self.alias = alias
        self.path = lock_path(name, _settings.config(alias).prefix)
        self.identifier = identifier
        self.timeout = timeout

    def new_lock(self) -> Lock:
        return Lock(get_client(self.alias), self.path, identifier=self.identifier)

    def take(self, lock: Lock) -> bool:
        return lock.acquire(blocking=self.timeout != 0, timeout=self.timeout or None)

    def refusal(self) -> str:
        if self.timeout == 0:
            return f"lock {self.name!r} ({self.path}) is held elsewhere"
        if self.timeout is None:
            return f"lock {self.name!r} ({self.path}) was not acquired"
        return f"lock {self.name!r} ({self.path}) not acquired within {self.timeout:g}s"


def acquire(target: Target) -> Lock | None:
    """The held lock of ``target``, or None when not acquired in time; blocking."""
    lock = target.new_lock()
    return lock if target.take(lock) else None


class _Attempt:
    """One acquire on a thread of its own that the awaiting task can call off."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._guard = threading.Lock()
        self._called_off = threading.Event()
        self._lock: Lock | None = None

    def run(self) -> Lock | None:
        lock = self._target.new_lock()
        with self._guard:
            if self._called_off.is_set():
                return None
            self._lock = lock
        if not self._target.take(lock):
            return None
        with self._guard:
            if not self._called_off.is_set():
                return lock
        lock.release()
        return None

    def call_off(self) -> None:
        with self._guard:
            self._called_off.set()
            lock = self._lock
        if lock is not None:
            lock.cancel()


def _in_thread(fn: Callable[[], T], name: str) -> asyncio.Future[T]:
    """``fn()`` on a new daemon thread, as a future of the running loop."""
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if not done.set_running_or_notify_cancel():
            return
        try:
            done.set_result(fn())
        except BaseException as exc:  # handed to the awaiting task
            done.set_exception(exc)

    future = asyncio.wrap_future(done)
    threading.Thread(target=run, name=name, daemon=True).start()
    return future


async def _outlast(
    future: asyncio.Future[Any], on_cancel: Callable[[], None] | None = None
) -> asyncio.CancelledError | None:
    """Wait until ``future`` is done, even through cancellation; the cancellation, if one came.

    ``on_cancel`` runs when it comes and again every ``RECALL`` seconds while
    the thread runs on: ``Lock.cancel()`` ends only acquires already waiting,
    and the thread may be a few steps short of its acquire.
    """
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.wait((future,), timeout=None if cancelled is None else RECALL)
        except asyncio.CancelledError as exc:
            cancelled = exc
        if cancelled is not None and on_cancel is not None and not future.done():
            on_cancel()
    return cancelled


async def acquire_async(target: Target) -> Lock | None:
    """``acquire`` for async code: the wait runs on a thread, the loop goes on."""
    attempt = _Attempt(target)
    future = _in_thread(attempt.run, f"zk_lock {target.name}")
    cancelled = await _outlast(future, attempt.call_off)
    if cancelled is None:
        return future.result()
    if future.exception() is None:
        got = future.result()
        if got is not None:  # acquired before the call-off reached the thread
            await release_async(got)
    raise cancelled


async def release_async(lock: Lock) -> None:
    """``lock.release()`` on a thread, finished even when the awaiting task is cancelled."""
    future = _in_thread(lock.release, f"zk_lock release {lock.path}")
    cancelled = await _outlast(future)
    if cancelled is not None:
        future.exception()  # retrieved: the cancellation is what the caller hears of
        raise cancelled
    future.result()
