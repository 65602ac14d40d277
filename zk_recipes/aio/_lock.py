"""``aio.Lock``: the Lock recipe awaited, on the same contender queue and hold rules.

Not a second lock: it holds a sync ``_Mutex`` of the Lock kind and drives the
very steps its ``acquire()`` runs (_client/steps.py) with the asyncio
driver (``_drive.py``), so Java's InterProcessMutex, our sync Lock and this
one queue in one directory and exclude each other. What is its own: the local
gate (one object is one contender; coroutines that share it queue on an
``asyncio.Lock``, as threads sharing a sync Lock queue on a condition), the
loss as an ``asyncio.Event``, and the rule that an object serves one loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import ClassVar

from zk_recipes import _metrics
from zk_recipes._client.client import ZkClient
from zk_recipes._deadline import acquire_deadline, remaining
from zk_recipes._errors import RecipeUsageError
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.locklike import AsyncLockVerbs
from zk_recipes._locks.lock import (
    LOCK_KIND,
    RLOCK_KIND,
    LockStatistics,
    MutexKind,
    _Hold,
    _Mutex,
)
from zk_recipes.aio import _keeper
from zk_recipes.aio._drive import run_awaited
from zk_recipes.aio._loss import LossEvent


async def _gate_within(gate: asyncio.Lock, timeout: float | None) -> bool:
    """Take the local gate within ``timeout``; False if not. A cancel is raised, never lost.

    Not ``asyncio.wait_for``: before Python 3.12 it swallows a cancellation that
    comes as the gate is taken, and the task would go on to queue in ZooKeeper.
    """
    taking = asyncio.ensure_future(gate.acquire())
    try:
        done, _ = await asyncio.wait((taking,), timeout=timeout)
    except asyncio.CancelledError:
        taking.cancel()
        if taking.done() and not taking.cancelled():
            gate.release()  # taken as the cancel came: given back
        raise
    if done:
        return True
    taking.cancel()
    return False


class Lock(AsyncLockVerbs):
    """A fair, fenced, loss-aware distributed lock for asyncio code; Lock's twin.

    ``aio.Lock(client, "/locks/report", identifier=None)`` queues with every
    Lock (sync, asyncio, and Curator's InterProcessMutex) on the same path.
    Use it as ``async with lock:``, ``async with lock.acquired(timeout=5):``
    (LockTimeout if not in time), or ``await lock.acquire(timeout=None) ->
    bool`` and ``await lock.release()``.

    Waiting holds no thread: a watch completes a future on the loop.
    Cancelling a waiting ``acquire()`` (``task.cancel()``, ``asyncio.timeout``,
    ``wait_for``) deletes its node before the CancelledError goes on. While
    held: ``fencing_token``, ``check()`` (raises LockLost once the session is
    lost; never blocks), ``is_held()``, and ``lost``, an ``asyncio.Event`` set
    when the hold is lost (``await lock.lost.wait()``, or race it with your
    work). One object serves one event loop; coroutines sharing it queue
    locally. See docs/asyncio.md.
    """

    #: The variant (as the sync Lock's and RLock's kinds): RLock re-enters per task.
    _KIND: ClassVar[MutexKind] = LOCK_KIND

    def __init__(self, client: ZkClient, path: str, *, identifier: str | None = None) -> None:
        self._inner = self._make_inner(client, path, identifier)
        #: The task that holds it (re-entry is per task, as the sync one's is per thread).
        self._owner: asyncio.Task[object] | None = None
        self.client = self._inner.client
        self.path = self._inner.path
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gate: asyncio.Lock | None = None
        self._lost: LossEvent | None = None
        self._inner.on_lost(self._heard_lost)

    def _make_inner(self, client: ZkClient, path: str, identifier: str | None) -> _Mutex:
        """The sync recipe whose steps this object awaits (a half of a ReadWriteLock's, say)."""
        return _Mutex(client, path, self._KIND, identifier=identifier)

    # -- the loop this object serves ------------------------------------------
    def _bind(self) -> tuple[asyncio.Lock, asyncio.Event]:
        """The local gate and the loss event, on the loop this object serves."""
        loop = asyncio.get_running_loop()
        if self._gate is None or self._lost is None:
            self._loop, self._gate, self._lost = loop, asyncio.Lock(), LossEvent()
        elif self._loop is not loop:
            raise RecipeUsageError(
                f"{self!r} serves the event loop it was first used on; make one aio.Lock "
                "per loop (per thread running a loop)"
            )
        return self._gate, self._lost

    def _heard_lost(self, _mutex: object) -> None:
        loop, lost = self._loop, self._lost
        if loop is not None and lost is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
                loop.call_soon_threadsafe(lost.set)

    @property
    def lost(self) -> asyncio.Event:
        """Set when the held lock is lost with its session (cleared by the next acquire)."""
        return self._bind()[1]

    # -- acquire and release ----------------------------------------------------
    async def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> bool:
        """Take the lock; False only if not acquired in time (or at once, non-blocking).

        ``timeout`` covers the whole wait, connection trouble and a session
        expiry included, as the sync Lock's. Cancelling the task deletes our
        node first, then raises CancelledError.
        """
        gate, lost = self._bind()
        inner = self._inner
        task = asyncio.current_task()
        hold = inner._hold
        if hold is not None and task is not None and self._owner is task:
            if self._KIND.reentrant:
                hold.count += 1
                return True
            raise RecipeUsageError(
                f"this task already holds {self!r}: aio.Lock is not re-entrant (acquiring it "
                "again would wait for itself forever). Use aio.RLock, or release first."
            )
        deadline = acquire_deadline(blocking, timeout)
        began = time.monotonic() if _metrics.sink is not None else 0.0
        self.client.check_usable()
        busy = "another coroutine of this process has it"
        free = not (gate.locked() or getattr(gate, "_waiters", None))
        if not blocking and not free:
            self._not_acquired(False, busy)  # (a waiter being woken takes it next)
            return False
        try:
            if free or deadline is None:
                # No timer to pay for; free, it is taken at once, so a timeout of 0
                # still gets its try in ZooKeeper (a wait of 0 never would).
                await gate.acquire()
            elif not await _gate_within(gate, remaining(deadline)):
                self._not_acquired(True, busy)
                return False
        except asyncio.CancelledError:
            self._not_acquired(blocking, "", cancelled=True)
            raise
        try:
            cancel = Cancellation()
            steps = inner._take_steps(deadline, cancel)
            entry = await run_awaited(steps, cancel, inner._queue._forget_steps)
        except BaseException as exc:
            gate.release()
            if isinstance(exc, asyncio.CancelledError):
                self._not_acquired(blocking, "", cancelled=True)
            raise
        if entry is None:
            gate.release()
            self._not_acquired(blocking, "", unreached=inner._queue.unreached)
            return False
        inner._took(entry, began)
        self._owner = task
        lost.clear()
        _keeper.keep(self)
        return True

    def _not_acquired(
        self, blocking: bool, why: str, *, unreached: bool = False, cancelled: bool = False
    ) -> None:
        """Count and record why an acquire did not take the lock, as the sync Lock does
        (a cancelled one: ``refusal == "cancelled"``, neither busy nor timed out in metrics)."""
        inner = self._inner
        with inner._mutex:
            inner._timeouts += 1
        cancel = Cancellation()
        if cancelled:
            cancel.set()
        inner._refused(blocking, cancel, why, unreached=unreached)

    async def release(self) -> None:
        """Release the lock: its node is deleted (in the background if disconnected)."""
        self._bind()  # the loop this object serves, or RecipeUsageError
        holder = self._owner
        if (
            self._KIND.reentrant
            and self._inner._hold is not None
            and holder is not (asyncio.current_task())
        ):
            raise RecipeUsageError(
                f"{self!r} is held by another task; only the holding task may release an aio.RLock"
            )
        hold = self._inner._let_go()
        if hold is None:
            return  # an RLock's re-entry let go: still held
        await self._leave(hold)

    async def _leave(self, hold: _Hold) -> None:
        """Delete the node of a hold let go (to its end, through a cancel); open the gate."""
        gate, _ = self._bind()
        self._owner = None
        _keeper.forget(self, self._loop)
        try:
            await run_awaited(self._inner._leave_steps(hold), Cancellation())
        finally:
            gate.release()

    def _owning_tasks(self) -> tuple[asyncio.Task[object], ...]:
        """The task that holds it, for the keeper (``_keeper.py``)."""
        return () if self._owner is None else (self._owner,)

    async def _end_with_the_loop(self) -> None:
        """The loop's tasks are ending with this lock still held: release it, re-entries and all."""
        inner = self._inner
        with inner._mutex:
            hold = inner._hold
            if hold is None:
                return
            hold.count = 1
        let_go = inner._let_go()
        if let_go is not None:
            await self._leave(let_go)

    # -- while held (never blocking) ----------------------------------------------
    def is_held(self) -> bool:
        """True while this process holds the lock for sure (not in doubt, not lost)."""
        return self._inner.is_held()

    def check(self) -> None:
        """Raise LockLost if the lock was lost (as Lock.check; never blocks)."""
        self._inner.check()

    @property
    def fencing_token(self) -> int:
        """The czxid of our node: pass it to storage so it can refuse stale holders."""
        return self._inner.fencing_token

    @property
    def node(self) -> str | None:
        """Path of our node while held."""
        return self._inner.node

    def statistics(self) -> LockStatistics:
        """A snapshot of this lock object (see LockStatistics)."""
        return self._inner.statistics()

    def __repr__(self) -> str:
        return "<aio." + repr(self._inner)[1:]


class RLock(Lock):
    """Like ``aio.Lock``, but re-entrant per task: RLock's twin (Curator's InterProcessMutex).

    The holding task may acquire it again (a count goes up, nothing is sent)
    and must release it as often; only the holding task may release it.
    """

    _KIND = RLOCK_KIND
