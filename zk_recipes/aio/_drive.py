"""The asyncio driver of a recipe's steps (_client/steps.py): no thread waits for a coroutine.

- ``Reply``: a request already sent (from the loop's thread); its answer
  completes a future on the loop from the thread that read it (the
  callback runs inline there: ``Pending.add_done_callback(inline=True)``),
  with a timer for the request's timeout. No task, no thread.
- ``Call``: a rare slow path not written as steps (making a missing parent,
  finding a protected node after a lost reply) runs on a small pool of
  threads shared by the process (``POOL_THREADS``).
- ``WaitDeleted``: the getData watch completes a future on the loop from
  the connection's thread (``call_soon_threadsafe``); so do a close and a
  cancellation. ``WaitConnected``: a state listener of the client does.
  ``Pause``: a timer on the loop, cut short by a close or a cancellation.
  ``NewWake``/``Sleep``: a ``LoopWake`` the recipe registers, and a wait on it.

**Cancellation** (``task.cancel()``, ``asyncio.timeout``, ``wait_for``): the
driver sets the recipe's ``Cancellation``, the flag a sync ``cancel()``
sets, and drives the generator on to its end: the step under way ends at
once (a Reply is still awaited: a create may be on the wire, and its node
must be deleted; a Call is let finish on its thread), and the recipe's own
rules delete what it made. A result it still returned (the turn came as the
cancel did) is handed to ``undo``. Only then does the CancelledError go on,
once; a second cancel while this runs does not cut it short. Steps driven
without a Cancellation (a wait for leadership: nothing to take back) are
simply thrown the CancelledError.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from zk_recipes._client.awaitable import LoopWake, answer as _answer, settle
from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import StateChange
from zk_recipes._client.steps import Call, Reply, Step, Steps
from zk_recipes._deadline import remaining, request_timeout
from zk_recipes._errors import OperationTimeoutError
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.waits import (
    DeleteWatch,
    NewWake,
    Pause,
    Sleep,
    WaitConnected,
    WaitDeleted,
    forget_watch,
    read_verdict,
)

T = TypeVar("T")

#: Threads of the pool that runs the steps' bounded calls, for the whole process.
POOL_THREADS = 8

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_guard = threading.Lock()


def _the_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_guard:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                POOL_THREADS, thread_name_prefix="zk-recipes aio"
            )
        return _pool


def _forget_pool_in_child() -> None:
    """A forked child has none of its parent's threads: it starts a pool of its own."""
    global _pool, _pool_guard
    _pool, _pool_guard = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)


async def _finish(
    future: asyncio.Future[T], interrupted: Callable[[], object]
) -> tuple[T | None, BaseException | None, bool]:
    """Await ``future`` to its end whatever cancels us: (value, failure, cancelled meanwhile).

    ``interrupted()`` is called at the first cancel, at once: it ends the wait under way.
    """
    cancelled = False
    while True:
        try:
            return await asyncio.shield(future), None, cancelled
        except asyncio.CancelledError:
            if future.cancelled():
                return None, asyncio.CancelledError(), True
            if not cancelled:
                cancelled = True
                interrupted()
            if future.done():  # our cancel came as it ended
                failure = future.exception()
                return (None if failure else future.result()), failure, True
        except BaseException as exc:
            return None, exc, cancelled


async def run_awaited(
    steps: Steps[T],
    cancel: Cancellation | None,
    undo: Callable[[Any], Steps[Any]] | None = None,
) -> T:
    """Drive ``steps`` on the running loop (the module note); CancelledError after clean-up.

    ``cancel`` None: steps that made nothing to take back (a wait for leadership):
    a cancel ends the step under way at once and is thrown into the generator.
    """
    if cancel is None:
        return await _run_plain(steps)
    loop = asyncio.get_running_loop()
    answer: Any = None
    failure: BaseException | None = None
    cancelled = False
    while True:
        try:
            step = steps.send(answer) if failure is None else steps.throw(failure)
            answer = failure = None  # not kept alive by the driver while the step runs
        except StopIteration as done:
            result: T = done.value
            break
        except BaseException:
            if cancelled:
                raise asyncio.CancelledError from None
            raise
        # At a cancel the recipe's own rules give up and delete what they made.
        if isinstance(step, Reply):
            answer, failure, interrupted = await _reply(step, cancel.set)
        else:
            future: asyncio.Future[Any]
            if isinstance(step, Call):
                future = loop.run_in_executor(_the_pool(), step.fn)
            else:
                future = asyncio.ensure_future(_wait(step))
            answer, failure, interrupted = await _finish(future, cancel.set)
        cancelled = cancelled or interrupted
    if cancelled:
        if result is not None and undo is not None:
            await _finish(asyncio.ensure_future(_drive_out(undo(result))), lambda: None)
        raise asyncio.CancelledError
    return result


async def _run_plain(steps: Steps[T]) -> T:
    """``run_awaited`` without a Cancellation: a cancel is thrown into the generator."""
    answer: Any = None
    failure: BaseException | None = None
    while True:
        try:
            step = steps.send(answer) if failure is None else steps.throw(failure)
            answer = failure = None
        except StopIteration as done:
            result: T = done.value
            return result
        try:
            if isinstance(step, Reply):
                answer = await _answer(step.pending, step.timeout, "a request")
            elif isinstance(step, Call):
                answer = await asyncio.get_running_loop().run_in_executor(_the_pool(), step.fn)
            else:
                answer = await _wait(step)
        except BaseException as exc:  # a CancelledError included: the generator cleans up
            failure = exc


async def _drive_out(steps: Steps[Any]) -> None:
    """Drive clean-up ``steps`` to their end (they log their own failures)."""
    await run_awaited(steps, Cancellation())


async def _reply(
    step: Reply[T], interrupted: Callable[[], object]
) -> tuple[T | None, BaseException | None, bool]:
    """A ``Reply`` awaited on the loop (no task, no thread): (value, failure, cancelled).

    A cancel of ours cancels the future we await, not the request: its
    answer is listened for again and awaited to its end (the create of a
    node that must then be deleted, say). Past ``step.timeout``:
    OperationTimeoutError, as the blocking ``pending.result(timeout)``.
    """
    loop = asyncio.get_running_loop()
    future = settle(step.pending)
    listening = [future]

    def time_out() -> None:
        last = listening[-1]
        if not last.done():
            last.set_exception(
                OperationTimeoutError(f"ZooKeeper did not answer in time ({step.timeout:g} s)")
            )

    timer = loop.call_later(step.timeout, time_out)
    cancelled = False
    try:
        while True:
            try:
                return await future, None, cancelled
            except asyncio.CancelledError:
                if not cancelled:
                    cancelled = True
                    interrupted()
                if future.cancelled():
                    future = settle(step.pending)  # the answer is still coming: listen again
                    listening.append(future)
                    continue
                failure = future.exception()  # it ended as our cancel came
                return (None if failure else future.result()), failure, True
            except BaseException as exc:
                return None, exc, cancelled
    finally:
        timer.cancel()


async def _wait(step: Step) -> Any:
    if isinstance(step, WaitDeleted):
        return await _wait_deleted(step)
    if isinstance(step, WaitConnected):
        return await _wait_connected(step)
    if isinstance(step, Pause):
        await _pause(step)
        return None
    if isinstance(step, NewWake):
        return LoopWake()
    if isinstance(step, Sleep):
        wake = step.wake
        done, _ = await asyncio.wait({wake.future}, timeout=step.timeout)
        wake.clear()
        return bool(done)
    raise TypeError(f"no asyncio form for the step {step!r}")


async def _woken(
    wake: LoopWake, client: ZkClient, cancel: Cancellation | None, timeout: float | None
) -> None:
    """Sleep until ``wake`` is set (its watch, its listener), a close, ``cancel`` or the timeout."""
    with client.wake_on_close(wake):
        if cancel is None:
            await asyncio.wait({wake.future}, timeout=timeout)
        else:
            with cancel.wakes(wake):
                await asyncio.wait({wake.future}, timeout=timeout)


async def _wait_deleted(step: WaitDeleted) -> bool:
    wake = LoopWake()
    watch = DeleteWatch(wake.set)
    client = step.client
    limit = request_timeout(client.settings.connection_timeout, step.deadline)
    read = settle(client.get_async(step.path, watch=watch))
    await asyncio.wait({read}, timeout=limit)
    if not read.done():
        read.cancel()  # no answer in time: its late one is dropped
    verdict = read_verdict(read.result if read.done() and not read.cancelled() else None)
    if verdict is not None:
        return verdict
    await _woken(wake, client, step.cancel, remaining(step.deadline))
    forget_watch(step, watch)
    return watch.deleted


async def _wait_connected(step: WaitConnected) -> bool:
    client = step.client
    wake = LoopWake()

    def heard(change: StateChange) -> None:
        if change.state.is_connected:
            wake.set()

    client.add_listener(heard)
    try:
        state = client.state
        if state is not None and state.is_connected:
            return True
        await _woken(wake, client, None, step.timeout)
    finally:
        client.remove_listener(heard)
    state = client.state
    return state is not None and state.is_connected


async def _pause(step: Pause) -> None:
    await _woken(LoopWake(), step.client, step.cancel, step.seconds)
