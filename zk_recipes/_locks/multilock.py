"""MultiLock: all-or-nothing over several lock-like recipes (Curator's InterProcessMultiLock).

Algorithm: acquire the members one after the other in a FIXED global order
— sorted by the full server path (client namespace + path), then by the
connect string — and release them in reverse. Curator takes them in list
order, so two processes listing the same locks differently can deadlock;
with one global order they cannot. The deadline covers all members: each
gets what is left of the timeout. If a member is not acquired in time, or
raises, the members already taken are released (in reverse) and acquire
returns False (or re-raises): nothing stays held or queued.

Znodes: none of its own; each member keeps its own layout, so a Java
InterProcessMultiLock over the same paths excludes ours member by member.

Members: any lock-like recipe of this package (Lock, RLock, both halves of
ReadWriteLock, Semaphore, SemaphoreMutex), each at most once per path.

Holding: per thread and not re-entrant (re-entry raises RecipeUsageError);
the thread that acquired it releases it, since some members (RLock, the
read/write halves) must be released by their holder. SUSPENDED/LOST are the
members' business: ``is_held()`` is True only while every member is held for
sure, and ``lost`` is set (``on_lost`` callbacks run) when any member is lost
while the MultiLock is held. ``fencing_tokens`` maps each member's full path
to its token; ``fencing_token`` is the largest of them, which also grows with
every acquisition.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, final

from zk_recipes._deadline import acquire_deadline
from zk_recipes._errors import ConfigurationError, RecipeUsageError, WrongTypeError
from zk_recipes._internals.holding import LossSignal
from zk_recipes._internals.locklike import LockVerbs, PathLock
from zk_recipes._types import Contender

if TYPE_CHECKING:
    from typing_extensions import Self

    from zk_recipes._client.client import ZkClient

log = logging.getLogger("zk_recipes.lock")


@dataclasses.dataclass(frozen=True)
class MultiLockStatistics:
    """A snapshot of one MultiLock object (``multilock.statistics()``)."""

    #: Members' full paths (namespace + path), in acquisition order.
    paths: tuple[str, ...]
    #: Held by the calling thread, every member for sure.
    held: bool
    #: A member was lost with its session while held as part of this MultiLock.
    lost: bool
    #: Each member's token by full path (the calling thread's hold; empty if not held).
    fencing_tokens: dict[str, int]
    #: Names of the threads holding it (one per thread; not re-entrant).
    holder_threads: tuple[str, ...]
    #: Successful acquisitions so far.
    acquisitions: int
    #: Acquires that returned False.
    timeouts: int


# Members report a loss to every MultiLock they are part of through ONE callback
# each, registered once: MultiLocks made per use (``with MultiLock([a, b]):`` in a
# loop) must not pile callbacks up on long-lived locks, nor be kept alive by them.
_watchers: weakref.WeakKeyDictionary[PathLock, weakref.WeakSet[MultiLock]] = (
    weakref.WeakKeyDictionary()
)
_watchers_guard = threading.Lock()


def _watch(member: PathLock, multi: MultiLock) -> None:
    with _watchers_guard:
        group = _watchers.get(member)
        first = group is None
        if group is None:
            group = _watchers[member] = weakref.WeakSet()
        group.add(multi)
    if first:
        member.on_lost(_dispatch_loss)


def _dispatch_loss(member: PathLock) -> None:
    with _watchers_guard:
        group = list(_watchers.get(member, ()))
    for multi in group:
        multi._member_lost(member)


class _OnPath(Protocol):
    """What the global order reads of a member (a sync or an asyncio lock)."""

    @property
    def client(self) -> ZkClient: ...

    @property
    def path(self) -> str: ...

    @property
    def acquire(self) -> Callable[..., object]: ...


_M = TypeVar("_M", bound=_OnPath)


def full_path(lock: _OnPath) -> str:
    """The member's path on the server: the client's namespace + the path."""
    return lock.client.namespace + lock.path


def _order_key(lock: _OnPath) -> tuple[str, str]:
    return full_path(lock), lock.client.connect_string


def ordered_members(
    locks: Iterable[_M], *, kind: str, needs: tuple[str, ...], awaited: bool
) -> tuple[_M, ...]:
    """A MultiLock's members in the one global order, checked (the sync and asyncio forms').

    ``needs``: the attributes a member must have; ``awaited``: members' acquire
    is a coroutine (``aio.MultiLock``) or not (``MultiLock``): a mix is refused
    with the form to use, where it would otherwise fail at the first acquire.
    """
    members = list(locks)
    if not members:
        raise ConfigurationError(f"{kind} needs at least one lock")
    for lock in members:
        if type(lock).__name__ == "MultiLock":
            raise WrongTypeError(f"{kind} members cannot be MultiLocks: pass their locks instead")
        if callable(getattr(lock, "acquire", None)) and (
            inspect.iscoroutinefunction(lock.acquire) is not awaited
        ):
            other = "a sync" if awaited else "an asyncio"
            use = "MultiLock" if awaited else "zk_recipes.aio.MultiLock"
            raise WrongTypeError(
                f"{lock!r} is {other} lock: {kind} takes "
                f"{'asyncio' if awaited else 'sync'} locks only; use {use} for those"
            )
        # dir(), not hasattr: a property such as a read lock's ``lost`` is not read here.
        have = set(dir(lock))
        missing = [name for name in needs if name not in have]
        if missing:
            raise WrongTypeError(
                f"{kind} members must be lock-like recipes (Lock, RLock, ReadWriteLock halves, "
                f"Semaphore, SemaphoreMutex{' of zk_recipes.aio' if awaited else ''}); "
                f"{lock!r} lacks {', '.join(missing)}"
            )
    ordered = sorted(members, key=_order_key)
    for first, second in itertools.pairwise(ordered):
        if _order_key(first) == _order_key(second):
            raise ConfigurationError(
                f"{first!r} and {second!r} are on the same path {full_path(first)!r}: "
                f"a {kind} would wait for itself; list each lock once"
            )
    return tuple(ordered)


class MemberReads:
    """The reads of a held MultiLock over its members, the sync and asyncio forms' both.

    The class mixing it in keeps its members in ``_locks`` and says in
    ``_require_held`` what holding means for it (a thread, a task).
    """

    _locks: tuple[Any, ...]

    def _require_held(self) -> None:
        raise NotImplementedError

    def check(self) -> None:
        """Raise LockLost if any member was lost with its session (never blocks)."""
        self._require_held()
        for lock in self._locks:
            lock.check()

    @property
    def fencing_tokens(self) -> dict[str, int]:
        """Each member's fencing token, by full path (namespace + path)."""
        self._require_held()
        return {full_path(lock): lock.fencing_token for lock in self._locks}

    @property
    def fencing_token(self) -> int:
        """The largest member token: it grows with every acquisition of the MultiLock."""
        return max(self.fencing_tokens.values())


@final
class MultiLock(MemberReads, LockVerbs):
    """Hold several locks at once, or none: ``with MultiLock([a, b]):``.

    Members are any lock-like recipes on one path (Lock, RLock, the
    ReadWriteLock halves, Semaphore, SemaphoreMutex), each at most once per
    path. They are taken in one fixed global order (full path, then connect
    string), so two MultiLocks over the same locks never deadlock each other;
    Curator's InterProcessMultiLock takes its list in the order given
    instead, so a Java MultiLock over the same paths must list them in this
    sorted order too (see docs/recipes/multi-lock.md). The timeout covers
    every member; on a timeout or error the members taken are released.
    """

    _kind = "MultiLock"

    def __init__(self, locks: Iterable[PathLock]) -> None:
        self._locks = ordered_members(
            locks,
            kind="MultiLock",
            needs=("acquire", "release", "is_held", "on_lost", "client", "path"),
            awaited=False,
        )
        self._guard = threading.Lock()
        self._holders: dict[int, str] = {}
        self._loss: LossSignal[Any] = LossSignal(self, "MultiLock")
        #: Set when a member was lost while held as part of this MultiLock.
        self.lost = self._loss.event
        self._acquisitions = 0
        self._timeouts = 0
        for lock in self._locks:
            _watch(lock, self)

    @property
    def locks(self) -> tuple[PathLock, ...]:
        """The members, in the order they are acquired."""
        return self._locks

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take every member, or none; False only if they were not all acquired in time."""
        deadline = acquire_deadline(blocking, timeout)
        me = threading.get_ident()
        if me in self._holders:
            raise RecipeUsageError(
                f"this thread already holds {self!r}: MultiLock is not re-entrant "
                "(re-acquiring would deadlock). Release it first."
            )
        taken: list[PathLock] = []
        try:
            for lock in self._locks:
                if not blocking:
                    acquired = lock.acquire(blocking=False)
                elif deadline is None:
                    acquired = lock.acquire()
                else:
                    acquired = lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
                if not acquired:
                    self._release_quietly(taken)
                    with self._guard:
                        self._timeouts += 1
                    return False
                taken.append(lock)
        except BaseException:
            self._release_quietly(taken)
            raise
        with self._guard:
            self._holders[me] = threading.current_thread().name
            self._acquisitions += 1
            if not any(lock.lost.is_set() for lock in self._locks):
                self.lost.clear()
        return True

    def release(self) -> None:
        """Release every member, in reverse order (by the thread that acquired it)."""
        with self._guard:
            if self._holders.pop(threading.get_ident(), None) is None:
                raise RecipeUsageError(
                    f"release of {self!r}, which is not held by this thread (the thread "
                    "that acquired a MultiLock releases it)"
                )
        first_error: BaseException | None = None
        for lock in reversed(self._locks):
            try:
                lock.release()
            except BaseException as exc:  # release the others all the same
                if first_error is None:
                    first_error = exc
        if first_error is not None:
            raise first_error

    def is_held(self) -> bool:
        """True while this thread holds the MultiLock and every member is held for sure."""
        return threading.get_ident() in self._holders and all(
            lock.is_held() for lock in self._locks
        )

    def cancel(self) -> None:
        """End every ``acquire()`` of this MultiLock waiting now: each returns False.

        (It cancels the waits of the members, so it also ends waits on them
        made outside this MultiLock.)
        """
        for lock in self._locks:
            lock.cancel()

    def contenders(self) -> list[Contender]:
        """Every member's queue, members in acquisition order."""
        return [contender for lock in self._locks for contender in lock.contenders()]

    def on_lost(self, callback: Callable[[Self], object]) -> None:
        """Call ``callback(multilock)`` when a member is lost while held (on a thread of ours)."""
        self._loss.add(callback)

    def statistics(self) -> MultiLockStatistics:
        """A snapshot of this MultiLock (see MultiLockStatistics)."""
        with self._guard:
            holders = tuple(self._holders.values())
        mine = threading.get_ident() in self._holders
        return MultiLockStatistics(
            paths=tuple(full_path(lock) for lock in self._locks),
            held=self.is_held(),
            lost=self.lost.is_set(),
            fencing_tokens=self.fencing_tokens if mine else {},
            holder_threads=holders,
            acquisitions=self._acquisitions,
            timeouts=self._timeouts,
        )

    def __repr__(self) -> str:
        holders = list(self._holders.values())
        state = f"held by {', '.join(map(repr, holders))}" if holders else "unlocked"
        if holders and self.lost.is_set():
            state += " LOST"
        paths = ", ".join(full_path(lock) for lock in self._locks)
        return f"<{self._kind} [{paths}] {state}>"

    # -- internals -------------------------------------------------------
    def _require_held(self) -> None:
        if threading.get_ident() not in self._holders:
            raise RecipeUsageError(f"{self!r} is not held by this thread")

    def _release_quietly(self, taken: list[PathLock]) -> None:
        for lock in reversed(taken):
            try:
                lock.release()
            except Exception:
                log.warning("could not release %r after a failed MultiLock acquire", lock)

    def _member_lost(self, member: object) -> None:
        if not self._holders:
            return  # lost while held on its own, not as part of this MultiLock
        log.warning("%r lost its member %r", self, member)
        self._loss.fire()
