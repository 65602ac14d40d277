"""``aio.MultiLock``: several asyncio locks held at once, or none; MultiLock's twin.

Not a second algorithm: the members are the asyncio forms (each its own
recipe's steps, awaited), taken in the sync MultiLock's one global order
(``ordered_members``: full path, then connect string) and released in
reverse, so an ``aio.MultiLock``, a sync MultiLock and a Java
InterProcessMultiLock listing the same paths in that order never deadlock
each other. What is its own: the hold is a task's (not re-entrant; the task
that acquired it releases it, since the RLock and read-lock members are
their task's), and the loss is heard from the members' ``lost`` events
(``LossEvent``), no task per member.

A cancel while the members are taken cancels the member being waited for
(its own rules delete its node first), then releases the ones taken, each to
its end, before the CancelledError goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any, Protocol

from zk_recipes._client.client import ZkClient
from zk_recipes._deadline import acquire_deadline, remaining
from zk_recipes._errors import RecipeUsageError
from zk_recipes._internals.locklike import AsyncLockVerbs
from zk_recipes._locks.multilock import (
    MemberReads,
    MultiLockStatistics,
    full_path,
    ordered_members,
)
from zk_recipes.aio._loss import LossEvent

log = logging.getLogger("zk_recipes.lock")


class AsyncMember(Protocol):
    """What an ``aio.MultiLock`` takes: an asyncio lock-like recipe on one path."""

    @property
    def client(self) -> ZkClient: ...

    @property
    def path(self) -> str: ...

    @property
    def lost(self) -> asyncio.Event: ...

    @property
    def fencing_token(self) -> int: ...

    async def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> bool: ...

    async def release(self) -> None: ...

    def is_held(self) -> bool: ...

    def check(self) -> None: ...


class MultiLock(MemberReads, AsyncLockVerbs):
    """Hold several asyncio locks at once, or none: ``async with aio.MultiLock([a, b]):``.

    Members: ``aio.Lock``, ``aio.RLock``, the ``aio.ReadWriteLock`` halves,
    ``aio.Semaphore`` and ``aio.SemaphoreMutex``, each at most once per path.
    They are taken in MultiLock's one global order and released in reverse;
    the timeout covers them all, and on a timeout, an error or a cancel the
    members taken are released (nothing stays held or queued). While held:
    ``fencing_tokens`` (by full path), ``fencing_token`` (the largest),
    ``is_held()``, ``check()`` (LockLost if a member was lost; never blocks)
    and ``lost``, an ``asyncio.Event`` set when any member is lost. Held by
    one task, which releases it; not re-entrant.
    """

    _kind = "aio.MultiLock"

    def __init__(self, locks: Iterable[AsyncMember]) -> None:
        self._locks: tuple[AsyncMember, ...] = ordered_members(
            locks,
            kind=self._kind,
            needs=("acquire", "release", "is_held", "check", "lost", "client", "path"),
            awaited=True,
        )
        self._owner: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lost: asyncio.Event | None = None
        #: The members' loss events of the current hold (as its task sees them).
        self._heard: list[LossEvent] = []
        self._acquisitions = 0
        self._timeouts = 0

    @property
    def locks(self) -> tuple[AsyncMember, ...]:
        """The members, in the order they are acquired."""
        return self._locks

    def _bind(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._lost is None:
            self._loop, self._lost = loop, asyncio.Event()
        elif self._loop is not loop:
            raise RecipeUsageError(
                f"{self!r} serves the event loop it was first used on; make one per loop"
            )
        return self._lost

    @property
    def lost(self) -> asyncio.Event:
        """Set when a member is lost with its session while held (cleared by the next acquire)."""
        return self._bind()

    # -- acquire and release ----------------------------------------------------
    async def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> bool:
        """Take every member, or none; False only if they were not all acquired in time."""
        lost = self._bind()
        task = asyncio.current_task()
        if task is not None and self._owner is task:
            raise RecipeUsageError(
                f"this task already holds {self!r}: a MultiLock is not re-entrant "
                "(acquiring it again would wait for itself). Release it first."
            )
        deadline = acquire_deadline(blocking, timeout)
        taken: list[AsyncMember] = []
        try:
            for lock in self._locks:
                left = remaining(deadline) if blocking else None
                if not await lock.acquire(left, blocking=blocking):
                    self._timeouts += 1
                    await _release_all(taken, "after a MultiLock acquire that was not in time")
                    return False
                taken.append(lock)
        except BaseException:
            await _release_all(taken, "after a failed MultiLock acquire")
            raise
        self._owner = task
        self._acquisitions += 1
        lost.clear()
        for lock in self._locks:
            event = lock.lost
            if isinstance(event, LossEvent):
                event.add_listener(self._member_lost)
                self._heard.append(event)
        return True

    async def release(self) -> None:
        """Release every member, in reverse order (by the task that acquired it)."""
        self._bind()
        if self._owner is None or self._owner is not asyncio.current_task():
            raise RecipeUsageError(
                f"release of {self!r}, which is not held by this task (the task that "
                "acquired a MultiLock releases it)"
            )
        self._owner = None
        for event in self._heard:
            event.remove_listener(self._member_lost)
        self._heard.clear()
        await _release_all(list(self._locks), "", quiet=False)

    def _member_lost(self) -> None:
        if self._owner is None or self._lost is None:
            return
        log.warning("%r lost a member with its session", self)
        self._lost.set()

    # -- while held (never blocking) ----------------------------------------------
    def is_held(self) -> bool:
        """True while a task holds it and every member is held for sure (as aio.Lock's,
        readable from any code of the loop; a read-lock member answers for the caller's task)."""
        return self._owner is not None and all(lock.is_held() for lock in self._locks)

    def statistics(self) -> MultiLockStatistics:
        """A snapshot (see MultiLockStatistics; ``holder_threads`` names the holding task)."""
        owner = self._owner
        return MultiLockStatistics(
            paths=tuple(full_path(lock) for lock in self._locks),
            held=self.is_held(),
            lost=self._lost is not None and self._lost.is_set(),
            fencing_tokens=self.fencing_tokens if owner is not None else {},
            holder_threads=(owner.get_name(),) if owner is not None else (),
            acquisitions=self._acquisitions,
            timeouts=self._timeouts,
        )

    def __repr__(self) -> str:
        owner = self._owner
        state = f"held by {owner.get_name()!r}" if owner is not None else "unlocked"
        if owner is not None and self._lost is not None and self._lost.is_set():
            state += " LOST"
        paths = ", ".join(full_path(lock) for lock in self._locks)
        return f"<{self._kind} [{paths}] {state}>"

    def _require_held(self) -> None:
        if self._owner is None:
            raise RecipeUsageError(f"{self!r} is not held")


async def _release_all(taken: list[AsyncMember], why: str, *, quiet: bool = True) -> None:
    """Release ``taken`` in reverse, each to its end, whatever cancels us meanwhile.

    A cancel is raised once they are all released; ``quiet``: a member's
    failure is logged (the failure that brought us here goes on), else the
    first one is raised after the others are released.
    """
    cancelled = False
    first: BaseException | None = None
    for lock in reversed(taken):
        try:
            await lock.release()
        except asyncio.CancelledError:
            cancelled = True  # the member's release ran to its end before raising it
        except Exception as exc:
            if quiet:
                log.warning("could not release %r %s", lock, why, exc_info=True)
            elif first is None:
                first = exc
    if cancelled:
        raise asyncio.CancelledError
    if first is not None:
        raise first
