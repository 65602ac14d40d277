"""SemaphoreMutex: Curator's InterProcessSemaphoreMutex, a Semaphore with one lease.

Algorithm and znodes: the Semaphore's (semaphore.py), with ``max_leases=1``:
``<path>/locks/`` for its internal mutex and ``<path>/leases/`` for the one
lease, so Curator's InterProcessSemaphoreMutex on the same path excludes it.

Unlike Lock (one contender per object, other threads queue locally), each
thread using one SemaphoreMutex queues for the lease itself, and any thread
may release it, as with ``threading.Semaphore(1)``. Not re-entrant: a thread
that asks again while holding it gets RecipeUsageError instead of waiting for
itself forever.

SUSPENDED/LOST: as every hold (_internals/holding.py): SUSPENDED puts the
lease in doubt (``is_held()`` is False), LOST sets ``lost``, runs the
``on_lost`` callbacks and makes ``check()`` raise LockLost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, final

from zk_recipes._client.client import ZkClient
from zk_recipes._deadline import acquire_deadline
from zk_recipes._errors import RecipeUsageError
from zk_recipes._internals.locklike import LockVerbs
from zk_recipes._locks.lease import Lease
from zk_recipes._locks.lock import LockStatistics
from zk_recipes._locks.semaphore import MUTEX_RECIPE, mutex_semaphore
from zk_recipes._types import Contender

if TYPE_CHECKING:
    from typing_extensions import Self


@final
class SemaphoreMutex(LockVerbs):
    """A non-re-entrant lock: a Semaphore with one lease (Curator's InterProcessSemaphoreMutex).

    Unlike Lock, which is one contender per object, threads of one process
    using the same SemaphoreMutex each queue for the lease. Any thread may
    release it. Curator's InterProcessSemaphoreMutex on the same path
    excludes it. See docs/recipes/semaphore.md.
    """

    _kind = MUTEX_RECIPE

    def __init__(self, client: ZkClient, path: str, *, identifier: str | None = None) -> None:
        self._semaphore = mutex_semaphore(client, path, identifier=identifier)
        self.client: ZkClient = client
        self.path: str = self._semaphore.path
        self.lost = self._semaphore.lost
        self._guard = threading.Lock()
        self._lease: Lease | None = None
        self._holder: tuple[int, str] | None = None

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock; False only if it was not acquired in time (or at once, non-blocking)."""
        acquire_deadline(blocking, timeout)
        holder = self._holder
        if self._lease is not None and holder is not None and holder[0] == threading.get_ident():
            raise RecipeUsageError(
                f"this thread already holds {self!r}: SemaphoreMutex is not re-entrant "
                "(re-acquiring would deadlock). Release it first, or use RLock."
            )
        leases = self._semaphore.acquire_leases(1, blocking=blocking, timeout=timeout)
        if not leases:
            return False
        thread = threading.current_thread()
        with self._guard:
            self._lease = leases[0]
            self._holder = (thread.ident or 0, thread.name)
        return True

    def release(self) -> None:
        """Release the lock (any thread may)."""
        with self._guard:
            lease = self._lease
            if lease is None:
                raise RecipeUsageError(f"release of {self!r}, which is not held")
            self._lease = None
            self._holder = None
        lease.close()

    def cancel(self) -> None:
        """End every ``acquire()`` waiting on this object now: each returns False."""
        self._semaphore.cancel()

    def is_held(self) -> bool:
        """True while this process holds the lock for sure (not in doubt, not lost)."""
        lease = self._lease
        return lease is not None and lease.is_held()

    def check(self) -> None:
        """Raise LockLost if the lock was lost with its session."""
        if self._lease is None:
            raise RecipeUsageError(f"{self!r} is not held")
        self._semaphore.check()

    @property
    def fencing_token(self) -> int:
        """The czxid of our lease node."""
        lease = self._lease
        if lease is None:
            raise RecipeUsageError(f"{self!r} is not held: there is no fencing token")
        return lease.fencing_token

    @property
    def node(self) -> str | None:
        """Path of our lease node while held."""
        lease = self._lease
        return lease.path if lease is not None else None

    def on_lost(self, callback: Callable[[Self], object]) -> None:
        """Call ``callback(mutex)`` (on a listener thread) when the held lock is lost."""
        self._semaphore.on_lost(lambda _semaphore: callback(self))

    def contenders(self) -> list[Contender]:
        """The holder's lease node, then whoever waits (see Semaphore.contenders)."""
        return self._semaphore.contenders()

    def statistics(self) -> LockStatistics:
        lease = self._lease
        holder = self._holder
        counts = self._semaphore.statistics()
        return LockStatistics(
            path=self.path,
            held=self.is_held(),
            in_doubt=bool(lease and lease.in_doubt),
            lost=bool(lease and lease.lost),
            node=lease.path if lease else None,
            fencing_token=lease.fencing_token if lease else None,
            holder_thread=holder[1] if holder else None,
            depth=1 if lease else 0,
            acquisitions=counts.acquisitions,
            timeouts=counts.timeouts,
            losses=counts.losses,
        )

    def __repr__(self) -> str:
        lease = self._lease
        holder = self._holder
        if lease is None:
            state = "unlocked"
        elif lease.lost:
            state = "LOST"
        elif lease.in_doubt:
            state = "in doubt"
        else:
            state = f"held by {holder[1] if holder else '?'!r} token={lease.fencing_token}"
        waiting = self._semaphore.waiting
        if waiting:
            state += f" waiting={waiting}"
        return f"<{self._kind} {self.path} {state}>"
