"""ReadWriteLock: Curator's InterProcessReadWriteLock, fair to writers, with downgrade.

Algorithm: readers and writers queue in ONE directory (the contender queue of
_internals/contenders.py), ordered by sequence number whatever their kind.

- A **writer** holds the lock while it is first among all children, and waits
  on its immediate predecessor otherwise (Curator's rule).
- A **reader** holds it while no writer sorts before it, and otherwise waits
  on the nearest writer before it. Curator watches the *first* writer
  instead, so every blocked reader wakes on one node (a herd); the nearest
  writer gives each waiter one node to watch and keeps the queue FIFO: a
  reader behind a queued writer waits for that writer, so a stream of
  readers cannot starve it.

Znodes (Curator 5 layout, so Java InterProcessReadWriteLock halves and ours
share one queue): ``<path>/_c_<uuid>-__READ__<seq10>`` and
``<path>/_c_<uuid>-__WRIT__<seq10>``, EPHEMERAL_SEQUENTIAL under CONTAINER
parents; the sort key is the text after either token. Data: owner JSON.

Downgrade (CURATOR-621, as Curator 5.5 does it): the thread holding the
write lock takes the read lock at once, with an EPHEMERAL (not sequential)
``_c_<uuid>-__READ__<the writer's seq10>`` that sorts at the writer's place;
releasing the write lock then leaves the read lock at the head, and a writer
queued meanwhile stays out. Because such a node can appear *ahead* of a
waiter, neither half takes the contender queue's head shortcut: every wake-up
re-reads the queue. Upgrade (a reader asking for the write lock) would wait
on its own read node forever, so it raises RecipeUsageError.

Threads, as Curator: both halves are re-entrant per thread, and only the
holding thread releases. The write half is one contender per object (other
threads queue locally, as with RLock); the read half gives every thread its
own node, so threads of one process share the read lock and a thread that
asks after a queued writer waits behind it.

Downgrade only while the write hold is still ours, and atomically with it:
the read node is created in one multi with a check that the writer's node
still exists, so it cannot appear at the writer's place after that node
went (a new writer may already hold the lock then, and a read node at the
old writer's place would sort ahead of it: two holders); a write hold
already lost, or a read node that landed on another session, raises
LockLost instead.

SUSPENDED/LOST: as Lock (a hold is in doubt while SUSPENDED, lost on LOST:
``lost`` set, ``on_lost`` callbacks, ``check()`` raising LockLost).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, final

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.creates import CreateResult
from zk_recipes._deadline import acquire_deadline
from zk_recipes._errors import (
    LockLost,
    RecipeUsageError,
    SessionLost,
    TransactionFailedError,
    TransactionOutcomeUnknown,
)
from zk_recipes._internals.args import optional_str, require_client
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.contenders import Entry, sort_key
from zk_recipes._internals.holding import LossSignal, is_valid
from zk_recipes._internals.locklike import LockVerbs
from zk_recipes._locks.lock import LockStatistics, MutexKind, _Mutex
from zk_recipes._types import Contender, CreateMode, Owner

if TYPE_CHECKING:
    from typing_extensions import Self

log = logging.getLogger("zk_recipes.lock")

READ_TOKEN = "__READ__"
WRITE_TOKEN = "__WRIT__"
_SORT_TOKENS = (READ_TOKEN, WRITE_TOKEN)


def _read_rule(names: list[str], index: int) -> str | None:
    """A reader's turn: no writer before it; else wait for the nearest one."""
    for name in reversed(names[:index]):
        if WRITE_TOKEN in name:  # Curator tests `contains` too
            return name
    return None


def _write_rule(names: list[str], index: int) -> str | None:
    """A writer's turn: first of all; else wait for the immediate predecessor."""
    return None if index == 0 else names[index - 1]


# Neither half takes the head shortcut: a downgrade's read node can appear ahead of us.
WRITE_KIND = MutexKind(
    "WriteLock", WRITE_TOKEN, _SORT_TOKENS, True, _write_rule, False, "WriteLock"
)
READ_KIND = MutexKind("ReadLock", READ_TOKEN, _SORT_TOKENS, True, _read_rule, False, "ReadLock")


def holding_of(names: Sequence[str]) -> list[bool]:
    """Which of the queued nodes ``names`` (in queue order) hold the lock.

    The rule, written once (``holders()`` asks it too): a writer holds while
    it is first; a reader holds while no writer sorts before it, and a
    downgrade's read node, at its writer's key, ties with its writer.
    """
    keys = [sort_key(name, _SORT_TOKENS) for name in names]
    result = []
    for name, key in zip(names, keys, strict=True):
        if WRITE_TOKEN in name:
            result.append(key == keys[0])
        else:
            result.append(
                not any(WRITE_TOKEN in n and k < key for n, k in zip(names, keys, strict=True))
            )
    return result


@final
class WriteLock(_Mutex):
    """The exclusive half of a ReadWriteLock (``rw.write_lock``); re-entrant per thread.

    Holds the lock while its node is first of all readers and writers. The
    holding thread may also take the read lock (downgrade); a thread holding
    the read lock may not take the write lock (it would wait for its own read
    node forever: RecipeUsageError). Otherwise as RLock.
    """

    def __init__(self, rw: ReadWriteLock) -> None:
        super().__init__(rw.client, rw.path, WRITE_KIND, identifier=rw.identifier)
        self._rw = rw

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        acquire_deadline(blocking, timeout)
        me = threading.get_ident()
        hold = self._hold
        if (hold is None or hold.thread != me) and self._rw.read_lock._held_by(me):
            raise RecipeUsageError(
                f"this thread holds the read lock of {self._rw!r}: upgrading to the write lock "
                "would wait for its own read node forever. Release the read lock first (or "
                "take the write lock first and then the read lock: that downgrade is supported)."
            )
        return super().acquire(blocking, timeout)

    def contenders(self) -> list[Contender]:
        """Every reader and writer queued on the path, in order; holders are marked."""
        found = super().contenders()
        flags = holding_of([_paths.name_of(c.path) for c in found])
        return [dataclasses.replace(c, is_holder=h) for c, h in zip(found, flags, strict=True)]


class _ReadPart(_Mutex):
    """One thread's share of a read lock: its own node, re-entrant for that thread."""

    def __init__(self, read_lock: ReadLock) -> None:
        rw = read_lock._rw
        super().__init__(rw.client, rw.path, READ_KIND, identifier=rw.identifier)
        self._rw = rw
        self.on_lost(read_lock._part_lost)

    def _take(self, deadline: float | None, cancel: Cancellation) -> Entry | None:
        write = self._rw.write_lock._hold
        if write is None or write.thread != threading.get_ident():
            return super()._take(deadline, cancel)
        return self._downgrade(write.entry)

    def _downgrade(self, writer: Entry) -> Entry:
        """A read node at the writer's place in the queue, made only while the writer's node is."""
        client = self.client
        write = self._rw.write_lock._hold
        if write is None or not is_valid(client, write):
            raise LockLost(
                f"the write lock of {self._rw.path} that this thread holds was lost with its "
                "session: it cannot be downgraded to the read lock (another process may hold "
                "the write lock now). Release the write lock, then take the read lock."
            )
        sequence = writer.name.rsplit(WRITE_TOKEN, 1)[1]
        # One transaction: the read node (protected: ``_c_<uuid>-__READ__<seq>``, so a
        # lost reply is answered by finding it) only while the writer's node is there.
        tx = client.transaction().check(writer.path, -1)
        tx.create(
            _paths.join(self.path, READ_TOKEN + sequence),
            Owner.here_bytes(self.identifier),
            mode=CreateMode.EPHEMERAL,
            protected=True,
        )
        try:
            created = tx.commit()[1]
        except (TransactionFailedError, TransactionOutcomeUnknown, SessionLost) as exc:
            if isinstance(exc, TransactionFailedError) and exc.index != 0:
                raise  # not the writer's node: a fault of its own
            # The writer's node is gone, or its session is (told by the server before
            # the client had heard of it, or the session ended while the reply was
            # awaited, taking an ephemeral read node with it): nothing is held.
            raise LockLost(
                f"the write lock of {self._rw.path} was lost (its node or its session is "
                "gone): it cannot be downgraded to the read lock. Release the write lock, "
                "then take the read lock."
            ) from exc
        assert isinstance(created, CreateResult)
        path, stat = created.path, created.stat
        name = _paths.name_of(path)
        entry = Entry(
            path,
            name,
            stat.czxid,
            stat.ephemeral_owner,
            client.session_epoch(stat.ephemeral_owner),
        )
        if entry.epoch is None or entry.epoch != writer.epoch:
            client.delete(path, guaranteed=True, session=entry.session_id, czxid=entry.czxid)
            raise LockLost(
                f"the session of the write lock of {self._rw.path} ended during the downgrade; "
                "release the write lock, then take the read lock"
            )
        return entry


@final
class ReadLock(LockVerbs):
    """The shared half of a ReadWriteLock (``rw.read_lock``): every holding thread has its node.

    Threads of one process share it, each with its own node; a thread that
    asks after a writer queued waits behind that writer. Re-entrant per
    thread; each thread releases what it took.
    """

    _kind = "ReadLock"

    def __init__(self, rw: ReadWriteLock) -> None:
        self._rw = rw
        self.client: ZkClient = rw.client
        self.path: str = rw.path
        self._parts: dict[int, _ReadPart] = {}
        self._guard = threading.Lock()
        self._loss: LossSignal[Any] = LossSignal(self, f"ReadLock {rw.path}")
        #: Set when a held read node was lost with its session (cleared by the next acquire).
        self.lost = self._loss.event
        self._acquisitions = 0
        self._timeouts = 0

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the read lock for this thread; False only if not acquired in time."""
        acquire_deadline(blocking, timeout)
        me = threading.get_ident()
        with self._guard:
            part = self._parts.get(me)
            if part is None:
                part = self._parts[me] = _ReadPart(self)
        try:
            acquired = part.acquire(blocking, timeout)
        except BaseException:
            self._discard_if_idle(me, part)
            raise
        with self._guard:
            if acquired:
                self._acquisitions += 1
                if not any(p.lost.is_set() for p in self._parts.values()):
                    self.lost.clear()
            else:
                self._timeouts += 1
        if not acquired:
            self._discard_if_idle(me, part)
        return acquired

    def release(self) -> None:
        """Release this thread's read lock (once per acquire)."""
        me = threading.get_ident()
        part = self._parts.get(me)
        if part is None or part._hold is None:
            raise RecipeUsageError(
                f"release of {self!r}, which is not held by this thread (each thread "
                "releases the read locks it took)"
            )
        try:
            part.release()
        finally:
            self._discard_if_idle(me, part)

    def cancel(self) -> None:
        """End every ``acquire()`` of the read lock waiting now (each returns False)."""
        with self._guard:
            parts = list(self._parts.values())
        for part in parts:
            part.cancel()

    def is_held(self) -> bool:
        """True while this thread holds the read lock for sure (not in doubt, not lost)."""
        part = self._parts.get(threading.get_ident())
        return part is not None and part.is_held()

    def check(self) -> None:
        """Raise LockLost if this thread's read lock was lost with the session."""
        self._mine().check()

    @property
    def fencing_token(self) -> int:
        """The czxid of this thread's read node."""
        return self._mine().fencing_token

    @property
    def node(self) -> str | None:
        """Path of this thread's read node while held."""
        part = self._parts.get(threading.get_ident())
        return part.node if part is not None else None

    def on_lost(self, callback: Callable[[Self], object]) -> None:
        """Call ``callback(read_lock)`` when a held read node is lost (on a thread of ours)."""
        self._loss.add(callback)

    def contenders(self) -> list[Contender]:
        """Every reader and writer queued on the path, in order; holders are marked."""
        return self._rw.write_lock.contenders()

    def statistics(self) -> LockStatistics:
        """This thread's view (held, token, depth) with counters over all threads."""
        part = self._parts.get(threading.get_ident())
        mine = part.statistics() if part is not None else None
        return LockStatistics(
            path=self.path,
            held=mine.held if mine else False,
            in_doubt=mine.in_doubt if mine else False,
            lost=mine.lost if mine else False,
            node=mine.node if mine else None,
            fencing_token=mine.fencing_token if mine else None,
            holder_thread=mine.holder_thread if mine else None,
            depth=mine.depth if mine else 0,
            acquisitions=self._acquisitions,
            timeouts=self._timeouts,
            losses=self._loss.count,
        )

    def __repr__(self) -> str:
        with self._guard:
            parts = list(self._parts.values())
        holds = [p._hold for p in parts if p._hold is not None]
        waiting = len(parts) - len(holds)
        if not holds:
            state = "unlocked"
        else:
            state = f"held by {len(holds)} thread{'s' if len(holds) > 1 else ''}"
            lost = sum(not is_valid(self.client, h) for h in holds)
            if lost:
                state += f" ({lost} LOST)"
        if waiting:
            state += f" waiting={waiting}"
        return f"<{self._kind} {self.path} {state}>"

    # -- internals -------------------------------------------------------
    def _mine(self) -> _ReadPart:
        part = self._parts.get(threading.get_ident())
        if part is None or part._hold is None:
            raise RecipeUsageError(f"{self!r} is not held by this thread")
        return part

    def _held_by(self, thread: int) -> bool:
        part = self._parts.get(thread)
        return part is not None and part._hold is not None

    def _discard_if_idle(self, thread: int, part: _ReadPart) -> None:
        with self._guard:
            if part._hold is None and self._parts.get(thread) is part:
                del self._parts[thread]

    def _part_lost(self, _part: object) -> None:
        self._loss.fire()


@final
class ReadWriteLock:
    """A fair shared/exclusive lock: ``rw.read_lock`` and ``rw.write_lock``.

    ``ReadWriteLock(client, "/locks/catalog")``. Readers share it, a writer
    holds it alone, and requests are served in order, so a stream of readers
    cannot starve a queued writer. Curator's InterProcessReadWriteLock on the
    same path takes part in the same queue. The write lock holder may take
    the read lock too (downgrade); a reader asking for the write lock raises
    RecipeUsageError. See docs/recipes/read-write-lock.md.
    """

    def __init__(self, client: ZkClient, path: str, *, identifier: str | None = None) -> None:
        self.client = require_client(client, "ReadWriteLock")
        self.path = _paths.validate_writable_path(path)
        self.identifier = optional_str(identifier, "identifier")
        self.read_lock = ReadLock(self)
        self.write_lock = WriteLock(self)

    def contenders(self) -> list[Contender]:
        """Every reader and writer queued on the path, in order; holders are marked."""
        return self.write_lock.contenders()

    def __repr__(self) -> str:
        return f"<ReadWriteLock {self.path} write={self.write_lock!r} read={self.read_lock!r}>"
