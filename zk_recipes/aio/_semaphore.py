"""``aio.Semaphore`` and ``aio.SemaphoreMutex``: the semaphore awaited, on its own machinery.

Not a second semaphore: the leases, the counting and the records are a sync
``Semaphore``'s (its ``_lease_steps``, run by the asyncio driver; its holds,
loss accounting and statistics), so Curator's InterProcessSemaphoreV2, our
sync Semaphore and this one count the same leases on one path. What is the
asyncio form's own is its internal mutex (``<path>/locks``): an ``aio.Lock``
of the internal kind, so a coroutine waiting its turn holds no thread, and
coroutines of one object queue locally on it as threads of a sync one do.
A release gives back the calling task's newest lease first, as the sync one
prefers the calling thread's.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from typing import ClassVar

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._deadline import acquire_deadline, remaining
from zk_recipes._errors import ConfigurationError, RecipeUsageError, WrongTypeError
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.contenders import Entry
from zk_recipes._internals.locklike import AsyncLockVerbs
from zk_recipes._locks.lease import Lease, SemaphoreStatistics
from zk_recipes._locks.lock import INNER_LOCK_KIND, LockStatistics, MutexKind
from zk_recipes._locks.semaphore import (
    LOCKS_DIR,
    MUTEX_RECIPE,
    Semaphore as _SyncSemaphore,
    _over,
    _Restart,
)
from zk_recipes.aio import _keeper
from zk_recipes.aio._drive import run_awaited
from zk_recipes.aio._lock import Lock
from zk_recipes.aio._loss import LossEvent


def _task_id() -> int:
    """Who holds a lease, as the sync semaphore's thread ident: the calling task (0 off a loop)."""
    try:
        return id(asyncio.current_task())
    except RuntimeError:  # read from a thread: no task to prefer
        return 0


class _InternalMutex(Lock):
    """A semaphore's internal mutex (``<path>/locks``), awaited; not counted as a Lock."""

    _KIND: ClassVar[MutexKind] = INNER_LOCK_KIND


class Semaphore(AsyncLockVerbs):
    """A counting semaphore for asyncio code: at most ``max_leases`` holders; Semaphore's twin.

    ``aio.Semaphore(client, "/pools/db", max_leases=5)``: ``async with sem:``
    takes one lease; ``await sem.acquire(timeout=None, blocking=True) ->
    bool`` and ``await sem.release()``; ``await sem.acquire_leases(n)`` takes
    n at once (all or none) as ``Lease`` objects, given back by ``await
    sem.return_leases(leases)``. The sync Semaphore's and Curator's
    InterProcessSemaphoreV2's leases on the path count the same (give every
    process the same ``max_leases``). Waiting holds no thread; a cancelled
    wait deletes what it made first. ``lost`` is an ``asyncio.Event``;
    ``fencing_token``, ``leases``, ``is_held()``, ``check()`` and
    ``statistics()`` never block. One object serves one loop.
    """

    def __init__(
        self, client: ZkClient, path: str, max_leases: int, *, identifier: str | None = None
    ) -> None:
        self._sync = _SyncSemaphore(client, path, max_leases, identifier=identifier)
        self.client = self._sync.client
        self.path = self._sync.path
        self.max_leases = self._sync.max_leases
        self._mutex = _InternalMutex(
            client, _paths.join(self.path, LOCKS_DIR), identifier=identifier
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lost: LossEvent | None = None
        #: Tasks that took the leases held (the keeper waits for them at the loop's end).
        self._lease_tasks: weakref.WeakSet[asyncio.Task[object]] = weakref.WeakSet()
        self._sync.on_lost(self._heard_lost)

    def _bind(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._lost is None:
            self._loop, self._lost = loop, LossEvent()
        elif self._loop is not loop:
            raise RecipeUsageError(
                f"{self!r} serves the event loop it was first used on; make one per loop"
            )
        return self._lost

    def _heard_lost(self, _semaphore: object) -> None:
        loop, lost = self._loop, self._lost
        if loop is not None and lost is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
                loop.call_soon_threadsafe(lost.set)

    @property
    def lost(self) -> asyncio.Event:
        """Set when a held lease is lost with its session (cleared by the next acquire)."""
        return self._bind()

    # -- acquire and give back --------------------------------------------------
    async def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> bool:
        """Take one lease; False only if not acquired in time (or at once, non-blocking)."""
        deadline = acquire_deadline(blocking, timeout)
        return bool(await self._acquire(1, deadline, blocking))

    async def acquire_leases(
        self, count: int = 1, *, blocking: bool = True, timeout: float | None = None
    ) -> list[Lease]:
        """Take ``count`` leases at once (all or none); an empty list if not in time."""
        deadline = acquire_deadline(blocking, timeout)
        if isinstance(count, bool) or not isinstance(count, int):
            raise WrongTypeError(f"count must be an int, got {count!r}")
        if not 1 <= count <= self.max_leases:
            raise ConfigurationError(
                f"count must be between 1 and max_leases ({self.max_leases}), got {count}: "
                "more leases than the limit could never be granted"
            )
        return await self._acquire(count, deadline, blocking)

    async def _acquire(self, count: int, deadline: float | None, blocking: bool) -> list[Lease]:
        lost = self._bind()
        sync = self._sync
        began, cancel = sync._begin(Cancellation())
        try:
            entries = await self._entries(count, deadline, cancel)
        finally:
            sync._done_waiting()
        leases = sync._granted(entries, _task_id(), began, blocking, cancel)
        if leases:
            task = asyncio.current_task()
            if task is not None:
                self._lease_tasks.add(task)
            _keeper.keep(self)  # a lease left held when the loop's tasks end is given back
            if not sync.lost.is_set():
                lost.clear()
        return leases

    async def _entries(
        self, count: int, deadline: float | None, cancel: Cancellation
    ) -> list[Entry]:
        """The sync acquire's loop: take the internal mutex, make the leases under it."""
        sync = self._sync
        while True:
            if cancel.is_set() or not await self._mutex.acquire(timeout=remaining(deadline)):
                return []
            try:
                steps = sync._lease_steps(count, deadline, cancel, self._mutex._inner)
                return await run_awaited(steps, cancel, sync._delete_steps)
            except _Restart:
                if _over(deadline, cancel):
                    return []
            finally:
                await self._mutex.release()

    async def release(self) -> None:
        """Give back one lease: the calling task's newest first (any task may)."""
        lease = self._sync._pick(_task_id())
        try:
            await run_awaited(self._sync._delete_lease_steps(lease), Cancellation())
        finally:
            self._forget_if_idle()

    async def return_leases(self, leases: list[Lease]) -> None:
        """Give back ``leases`` (from ``acquire_leases``); one already given back is skipped."""
        sync = self._sync
        for lease in leases:
            with sync._guard:
                if lease.closed:
                    continue
                sync._detach(lease)
            try:
                await run_awaited(sync._delete_lease_steps(lease), Cancellation())
            finally:
                self._forget_if_idle()

    def _forget_if_idle(self) -> None:
        if not self._sync.leases:
            self._lease_tasks.clear()
            _keeper.forget(self, self._loop)

    def _owning_tasks(self) -> list[asyncio.Task[object]]:
        """The tasks that took the leases held, for the keeper (``_keeper.py``)."""
        return list(self._lease_tasks)

    async def _end_with_the_loop(self) -> None:
        """The loop's tasks are ending with leases still held: give them all back."""
        await self.return_leases(self._sync.leases)

    # -- while held (never blocking) ----------------------------------------------
    def is_held(self) -> bool:
        """True while this object holds at least one lease for sure."""
        return self._sync.is_held()

    def check(self) -> None:
        """Raise LockLost if a lease this object holds was lost with its session."""
        self._sync.check()

    @property
    def fencing_token(self) -> int:
        """Token of the lease this task took last (else the newest held)."""
        me = _task_id()
        held = self._sync.leases
        lease = next((x for x in reversed(held) if x._thread == me), None)
        if lease is None and held:
            lease = held[-1]
        if lease is None:
            raise RecipeUsageError(f"{self!r} is not held: there is no fencing token")
        return lease.fencing_token

    @property
    def leases(self) -> list[Lease]:
        """The leases this object holds now, oldest first."""
        return self._sync.leases

    def statistics(self) -> SemaphoreStatistics:
        """A snapshot of this semaphore object (as the sync one's)."""
        return self._sync.statistics()

    def __repr__(self) -> str:
        return "<aio." + repr(self._sync)[1:]


class SemaphoreMutex(AsyncLockVerbs):
    """A non-re-entrant lock for asyncio code: a Semaphore with one lease; SemaphoreMutex's twin.

    Curator's InterProcessSemaphoreMutex on the same path excludes it. Each
    task queues for the lease itself and any task may release it; a task that
    asks again while holding it gets RecipeUsageError at once.
    """

    def __init__(self, client: ZkClient, path: str, *, identifier: str | None = None) -> None:
        self._semaphore = Semaphore(client, path, 1, identifier=identifier)
        self._semaphore._sync._metric = MUTEX_RECIPE
        self.client = self._semaphore.client
        self.path = self._semaphore.path

    @property
    def lost(self) -> asyncio.Event:
        """Set when the held lease is lost with its session."""
        return self._semaphore.lost

    async def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> bool:
        """Take the lock; False only if not acquired in time."""
        held = self._semaphore.leases
        if held and held[0]._thread == _task_id():
            raise RecipeUsageError(
                f"this task already holds {self!r}: a SemaphoreMutex is not re-entrant "
                "(acquiring it again would wait for itself forever)"
            )
        return await self._semaphore.acquire(timeout, blocking=blocking)

    async def release(self) -> None:
        """Release the lock (any task may)."""
        await self._semaphore.release()

    def is_held(self) -> bool:
        """True while held for sure (not in doubt, not lost)."""
        return self._semaphore.is_held()

    def check(self) -> None:
        """Raise LockLost if the held lease was lost with its session."""
        self._semaphore.check()

    @property
    def fencing_token(self) -> int:
        """The lease node's czxid."""
        return self._semaphore.fencing_token

    @property
    def node(self) -> str | None:
        """The lease node's path while held."""
        held = self._semaphore.leases
        return held[0].path if held else None

    def statistics(self) -> LockStatistics:
        """As the sync SemaphoreMutex's."""
        counts = self._semaphore.statistics()
        held = self._semaphore.leases
        lease = held[0] if held else None
        return LockStatistics(
            path=self.path,
            held=lease is not None and lease.is_held(),
            in_doubt=counts.in_doubt > 0,
            lost=counts.lost > 0,
            node=lease.path if lease else None,
            fencing_token=lease.fencing_token if lease else None,
            holder_thread=None,
            depth=1 if lease else 0,
            acquisitions=counts.acquisitions,
            timeouts=counts.timeouts,
            losses=counts.losses,
        )

    def __repr__(self) -> str:
        return f"<aio.SemaphoreMutex {self.path} via {self._semaphore!r}>"
