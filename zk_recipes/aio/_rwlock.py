"""``aio.ReadWriteLock``: the read-write lock's halves awaited, in the sync halves' queue.

Not a second read-write lock: the write half is an ``aio.Lock`` over the sync
write half's kind (``WRITE_KIND``), each task's share of the read half an
``aio.Lock`` over a sync read part (``_ReadPart``, ``READ_KIND``), so their
steps are the sync lock's and Java's InterProcessReadWriteLock, our sync
ReadWriteLock and this one queue in one directory under one rule. What is
the asyncio form's own is *who* a hold belongs to: the task, where the sync
form says the thread. Each task that takes the read half has its own node
(tasks share the read lock as threads do); the task holding the write half
may take the read half too (the downgrade: a read node at the writer's place,
made in one transaction while the writer's node is there, on the pool as the
rare slow path it is); a task holding the read half that asks for the write
half is refused at once (it would wait for its own read node forever).
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from typing import ClassVar

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import Call, Steps
from zk_recipes._errors import RecipeUsageError
from zk_recipes._internals.args import optional_str, require_client
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.contenders import Entry
from zk_recipes._internals.locklike import AsyncLockVerbs
from zk_recipes._locks.lock import LockStatistics, MutexKind, _Hold, _Mutex
from zk_recipes._locks.rwlock import READ_KIND, WRITE_KIND, _ReadPart
from zk_recipes.aio._lock import Lock


def _current() -> asyncio.Task[object] | None:
    """The calling task; None off a running loop (a property read from a thread)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


class WriteLock(Lock):
    """The exclusive half of an ``aio.ReadWriteLock`` (``rw.write_lock``); re-entrant per task."""

    _KIND: ClassVar[MutexKind] = WRITE_KIND

    def __init__(self, rw: ReadWriteLock) -> None:
        self._rw = rw
        super().__init__(rw.client, rw.path, identifier=rw.identifier)

    async def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> bool:
        """As ``aio.Lock.acquire``; RecipeUsageError at once for a task holding the read half."""
        task = asyncio.current_task()
        if self._owner is not task and task is not None and self._rw.read_lock._held_by(task):
            raise RecipeUsageError(
                f"this task holds the read lock of {self._rw!r}: upgrading to the write lock "
                "would wait for its own read node forever. Release the read lock first (or "
                "take the write lock first and then the read lock: that downgrade is supported)."
            )
        return await super().acquire(timeout, blocking=blocking)

    @property
    def _hold(self) -> _Hold | None:
        """The sync hold under it: what the read part's downgrade checks, as the sync half's."""
        return self._inner._hold


class _TaskReadPart(_ReadPart):
    """One task's read node: the sync read part; its downgrade asks for the task, not the thread."""

    def __init__(self, read_lock: ReadLock) -> None:
        super().__init__(read_lock)  # type: ignore[arg-type]  # its _rw and _part_lost
        self._write = read_lock._rw.write_lock

    def _take_steps(self, deadline: float | None, cancel: Cancellation) -> Steps[Entry | None]:
        write = self._write
        hold = write._inner._hold
        if hold is not None and write._owner is asyncio.current_task():
            entry: Entry = yield Call(functools.partial(self._downgrade, hold.entry))
            return entry
        return (yield from super()._take_steps(deadline, cancel))


class _ReadShare(Lock):
    """One task's share of the read half: an ``aio.Lock`` over its ``_TaskReadPart``."""

    _KIND: ClassVar[MutexKind] = READ_KIND

    def __init__(self, read_lock: ReadLock) -> None:
        self._read_lock = read_lock
        rw = read_lock._rw
        super().__init__(rw.client, rw.path, identifier=rw.identifier)

    def _make_inner(self, client: ZkClient, path: str, identifier: str | None) -> _Mutex:
        return _TaskReadPart(self._read_lock)


class ReadLock(AsyncLockVerbs):
    """The shared half of an ``aio.ReadWriteLock`` (``rw.read_lock``): a node per holding task.

    Tasks share it, each with its own node; a task that asks after a writer
    queued waits behind that writer. Re-entrant per task; each task releases
    what it took. ``fencing_token``, ``node``, ``is_held()``, ``check()``,
    ``lost`` and ``statistics()`` are the calling task's.
    """

    def __init__(self, rw: ReadWriteLock) -> None:
        self._rw = rw
        self.client = rw.client
        self.path = rw.path
        self._shares: dict[asyncio.Task[object] | None, _ReadShare] = {}
        #: Each task's view when it holds nothing: its last share's (a refusal's reason).
        self._last: weakref.WeakKeyDictionary[asyncio.Task[object], LockStatistics] = (
            weakref.WeakKeyDictionary()
        )

    def _part_lost(self, _part: object) -> None:
        """A read node was lost: its share's ``lost`` is set by the share itself."""

    def _held_by(self, task: asyncio.Task[object]) -> bool:
        share = self._shares.get(task)
        return share is not None and share._inner._hold is not None

    def _share(self) -> _ReadShare:
        task = asyncio.current_task()
        if task is None:
            raise RecipeUsageError("aio.ReadLock is used from a task of a running event loop")
        share = self._shares.get(task)
        if share is None:
            share = self._shares[task] = _ReadShare(self)
        return share

    def _mine(self) -> _ReadShare:
        share = self._shares.get(_current())
        if share is None or share._inner._hold is None:
            raise RecipeUsageError(f"{self!r} is not held by this task")
        return share

    def _discard_if_idle(self, share: _ReadShare) -> None:
        task = asyncio.current_task()
        if share._inner._hold is None and task is not None and self._shares.get(task) is share:
            del self._shares[task]
            self._last[task] = share.statistics()

    async def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> bool:
        """Take the read lock for this task; False only if not acquired in time."""
        share = self._share()
        try:
            acquired = await share.acquire(timeout, blocking=blocking)
        except BaseException:
            self._discard_if_idle(share)
            raise
        if not acquired:
            self._discard_if_idle(share)
        return acquired

    async def release(self) -> None:
        """Release this task's read lock (once per acquire)."""
        share = self._shares.get(_current())
        if share is None or share._inner._hold is None:
            raise RecipeUsageError(
                f"release of {self!r}, which is not held by this task (each task releases the "
                "read locks it took)"
            )
        try:
            await share.release()
        finally:
            self._discard_if_idle(share)

    def is_held(self) -> bool:
        """True while this task holds the read lock for sure (not in doubt, not lost)."""
        share = self._shares.get(_current())
        return share is not None and share.is_held()

    def check(self) -> None:
        """Raise LockLost if this task's read lock was lost with the session (never blocks)."""
        self._mine().check()

    @property
    def fencing_token(self) -> int:
        """The czxid of this task's read node."""
        return self._mine().fencing_token

    @property
    def node(self) -> str | None:
        """Path of this task's read node while held."""
        share = self._shares.get(_current())
        return share.node if share is not None else None

    @property
    def lost(self) -> asyncio.Event:
        """Set when this task's held read node is lost with its session."""
        return self._mine().lost

    def statistics(self) -> LockStatistics:
        """This task's view (held, token, depth); a fresh one when it holds nothing."""
        task = asyncio.current_task()
        share = self._shares.get(task) if task is not None else None
        if share is not None:
            return share.statistics()
        last = self._last.get(task) if task is not None else None
        if last is not None:
            return last
        return LockStatistics(self.path, False, False, False, None, None, None, 0, 0, 0, 0)

    def __repr__(self) -> str:
        holders = sum(s._inner._hold is not None for s in self._shares.values())
        return f"<aio.ReadLock {self.path} held by {holders} task{'s' if holders != 1 else ''}>"


class ReadWriteLock:
    """A fair shared/exclusive lock for asyncio code: ReadWriteLock's twin.

    ``aio.ReadWriteLock(client, "/locks/catalog")``: ``async with
    rw.read_lock:`` and ``async with rw.write_lock:``, in the queue of sync
    ReadWriteLocks and Curator's InterProcessReadWriteLock on the same path.
    Readers share it (each task its own node), a writer holds it alone, in
    order; the writing task may take the read lock too (downgrade); a reading
    task asking for the write lock gets RecipeUsageError. Waiting holds no
    thread; a cancelled wait deletes its node first. See docs/asyncio.md.
    """

    def __init__(self, client: ZkClient, path: str, *, identifier: str | None = None) -> None:
        self.client = require_client(client, "aio.ReadWriteLock")
        self.path = _paths.validate_writable_path(path)
        self.identifier = optional_str(identifier, "identifier")
        self.write_lock = WriteLock(self)
        self.read_lock = ReadLock(self)

    def __repr__(self) -> str:
        return f"<aio.ReadWriteLock {self.path} write={self.write_lock!r} read={self.read_lock!r}>"
