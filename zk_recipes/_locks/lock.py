"""Lock and RLock: Curator's InterProcessMutex, fenced and loss-aware.

Algorithm: the contender queue (_internals/contenders.py) with the mutex
rule: a contender holds the lock while it is first by sequence number and
waits on its immediate predecessor otherwise. An uncontended acquire+release
costs three requests in two round trips (create pipelined with the children
read, then the delete).

Variants are configured, not subclassed: a frozen ``MutexKind`` (Curator's
LockInternalsDriver) says which token the nodes carry, how the queue sorts,
which rule decides, whether it is re-entrant and whether the head shortcut
applies. Lock, RLock, both halves of ReadWriteLock and LeaderSelector's
mutex are ``_Mutex`` with different kinds.

Znodes (Curator 5 layout, so Java InterProcessMutex holders and ours exclude
each other on one path): ``<path>/_c_<uuid>-lock-<seq10>``, EPHEMERAL_SEQUENTIAL,
under CONTAINER parents. Data is small JSON owner metadata (``Owner``: host,
pid, thread, since, optional id), which Curator ignores.

Holding (the rules of _internals/holding.py, shared by every hold):

- The fencing token is our node's czxid: strictly increasing across the
  ensemble, so storage can refuse a write carrying an older token.
- SUSPENDED puts the lock *in doubt*: ``is_held()`` is False until
  RECONNECTED on the same session finds our node still there.
- LOST (the server expired the session, or the client declared it lost
  before the server could) and ``client.close()`` end the hold at once:
  ``check()`` raises LockLost from that moment, ``lost`` is set and the
  ``on_lost`` callbacks run. Another process may hold the lock now;
  ``release()`` then only forgets it locally and never deletes a node that
  is not ours.

Metrics and logs: ``MutexKind.metric`` is the ``recipe`` a variant records
under (zk_recipes/_metrics.py): wait time at the acquire that gets it, hold
time at the release that frees it (not at an RLock's re-entry), a refusal
as busy (non-blocking) or timed out (a cancelled acquire is neither), a
loss with its session (closing the client is not counted). A mutex inside
another recipe records nothing. The success path logs nothing.

Threads: one Lock object is one contender per process. Other threads that
call ``acquire()`` on the same object wait locally (no extra nodes, no herd).
``cancel()`` ends every acquire waiting on the object, from any thread.

Size: over the house limit (tests/test_module_sizes.py): one algorithm
(Curator's InterProcessMutex and LockInternals) with its statistics and the
documented public classes; a third of it is the docs users read on the
classes, and the contender queue and hold rules are _internals'.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, final

from zk_recipes import _metrics, _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import Steps, run_blocking
from zk_recipes._deadline import acquire_deadline, remaining
from zk_recipes._errors import ClientStateError, LockLost, RecipeUsageError
from zk_recipes._internals.args import optional_str, require_client
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.contenders import (
    ContenderQueue,
    Entry,
    Rule,
    first_in_line,
)
from zk_recipes._internals.holding import (
    HeldNodes,
    Hold,
    LossSignal,
    hold_fields,
    is_in_doubt,
    is_sure,
    is_valid,
    read_nodes,
    taken_now,
)
from zk_recipes._internals.locklike import LockVerbs
from zk_recipes._types import Contender, Owner

if TYPE_CHECKING:
    from typing_extensions import Self

log = logging.getLogger("zk_recipes.lock")

LOCK_TOKEN = "lock-"


@dataclasses.dataclass(frozen=True)
class MutexKind:
    """How one variant of the mutex queues and decides (Curator's LockInternalsDriver)."""

    #: The name errors and reprs use ("Lock", "RLock", "WriteLock"...).
    name: str
    #: The token in our node names (``lock-``, ``__WRIT__``, ``__READ__``).
    token: str
    #: The tokens the queue sorts by (the text after the last one).
    sort_tokens: tuple[str, ...]
    #: Whether the holding thread may acquire again (counted).
    reentrant: bool
    #: ``rule(sorted_names, our_index)``: None when it is our turn, else whom to wait for.
    rule: Rule
    #: Whether the head's deletion alone makes the second in line first (plain FIFO only).
    head_shortcut: bool
    #: The ``recipe`` of its metrics and logs; None for a mutex inside another recipe.
    metric: str | None


LOCK_KIND = MutexKind("Lock", LOCK_TOKEN, (LOCK_TOKEN,), False, first_in_line(1), True, "Lock")
RLOCK_KIND = dataclasses.replace(LOCK_KIND, name="RLock", reentrant=True, metric="RLock")
#: The mutex inside another recipe (a semaphore's): that recipe records what it holds.
INNER_LOCK_KIND = dataclasses.replace(LOCK_KIND, metric=None)


#: Why an acquire returned False (``LockStatistics.refusal``).
Refusal = Literal["held", "unreachable", "cancelled"]


@dataclasses.dataclass(frozen=True)
class LockStatistics:
    """A snapshot of one lock object, for logs and metrics (``lock.statistics()``)."""

    #: The lock's path, relative to the client's namespace.
    path: str
    #: Held for sure (not in doubt, not lost): what ``is_held()`` says.
    held: bool
    #: Held, but the connection is SUSPENDED (or not verified since): not for sure.
    in_doubt: bool
    #: Held, and lost with its session (``check()`` raises); not released yet.
    lost: bool
    #: Our node's path while held.
    node: str | None
    #: Our node's czxid while held.
    fencing_token: int | None
    #: Name of the thread that acquired it.
    holder_thread: str | None
    #: Re-entry depth (RLock); 1 while a Lock is held, 0 when not held.
    depth: int
    #: Successful acquisitions by this object so far.
    acquisitions: int
    #: Acquires that returned False (timed out, non-blocking, cancelled).
    timeouts: int
    #: Holds lost with their session so far.
    losses: int
    #: Why the newest acquire that returned False did: ``"held"`` (another
    #: contender was ahead, another thread of this process included),
    #: ``"unreachable"`` (ZooKeeper did not answer, or the client was not
    #: connected, until the deadline: nobody was seen holding it) or
    #: ``"cancelled"``; None before any. Faces answer "busy" only for "held".
    refusal: Refusal | None = None
    #: The session that owns our node while held (to write to it as its holder:
    #: ``ZkClient.set(..., session=)``); None when not held.
    session_id: int | None = None


@dataclasses.dataclass(eq=False)
class _Hold(Hold):
    thread: int = 0
    thread_name: str = ""
    count: int = 1


class _Mutex(LockVerbs):
    """What Lock, RLock, the read/write halves and the selector's mutex share."""

    def __init__(
        self,
        client: ZkClient,
        path: str,
        kind: MutexKind,
        *,
        identifier: str | None = None,
        node_data: bytes | None = None,
        stop: Cancellation | None = None,
    ) -> None:
        self.client = require_client(client, kind.name)
        self.path = _paths.validate_writable_path(path)
        self.identifier = optional_str(identifier, "identifier")
        self._spec = kind
        self._kind = kind.name
        self._node_data = node_data
        self._queue = ContenderQueue(client, self.path, kind.token, sort_tokens=kind.sort_tokens)
        self._mutex = threading.Lock()
        self._free = threading.Condition(self._mutex)
        self._busy = False  # a thread of ours is queued on the server, or holds the lock
        self._hold: _Hold | None = None
        self._stop = stop  # set for good: every wait ends (a closed LeaderSelector)
        self._cancel = Cancellation(stop)
        self._holds: HeldNodes[_Hold] = HeldNodes(client, self._mutex, self._holds_lost)
        self._loss: LossSignal[Any] = LossSignal(self, f"{kind.name} {self.path}")
        #: Set when the held lock was lost with its session (cleared by the next acquire).
        self.lost = self._loss.event
        self._acquisitions = 0
        self._timeouts = 0
        self._refusal: Refusal | None = None
        self._waiting = 0

    # -- public API ------------------------------------------------------
    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock; False only if it was not acquired in time (or at once, non-blocking).

        ``timeout`` covers the whole wait, however often the queue changes;
        connection trouble and even a session expiry during the wait are
        ridden out (the node is made again on the new session). A
        ``cancel()`` from another thread makes it return False at once.
        """
        deadline = acquire_deadline(blocking, timeout)
        sink = _metrics.sink
        began = time.monotonic() if sink is not None else 0.0
        me = threading.get_ident()
        hold = self._hold
        if hold is not None and hold.thread == me:
            if self._spec.reentrant:
                hold.count += 1
                return True
            raise RecipeUsageError(
                f"this thread already holds {self!r}: Lock is not re-entrant (re-acquiring "
                "would deadlock). Use RLock for re-entrant locking, or release first."
            )
        self.client.check_usable()  # fail fast when the client is closed or forked
        with self._mutex:
            cancel = self._cancel
            self._waiting += 1
            try:
                while self._busy:
                    left = remaining(deadline)
                    if cancel.is_set() or (left is not None and left <= 0):
                        self._timeouts += 1
                        self._refused(blocking, cancel, "another thread of this process has it")
                        return False
                    self._free.wait(left)
                if cancel.is_set():
                    self._timeouts += 1
                    self._refused(blocking, cancel, "")
                    return False
                self._busy = True
            finally:
                self._waiting -= 1
        try:
            entry = self._take(deadline, cancel)
        except BaseException:
            self._open_gate()
            raise
        if entry is None:
            with self._mutex:
                self._timeouts += 1
            self._open_gate()
            self._refused(blocking, cancel, "", unreached=self._queue.unreached)
            return False
        self._took(entry, began)
        return True

    def _took(self, entry: Entry, began: float) -> None:
        """Our turn came (``entry``): hold it, and follow the hold (the asyncio form's too)."""
        seq, in_doubt = taken_now(self.client)
        hold = _Hold(
            entry,
            seq,
            in_doubt,
            thread=threading.get_ident(),
            thread_name=threading.current_thread().name,
        )
        with self._mutex:
            self._hold = hold
            self._acquisitions += 1
        self.lost.clear()
        self._holds.add(hold)  # follows the hold; a loss in the meantime is caught here
        sink = _metrics.sink
        metric = self._spec.metric
        if sink is not None and metric is not None:
            hold.since = time.monotonic()
            sink.acquired(metric, self.path, hold.since - began)

    def release(self) -> None:
        """Release the lock (the node is deleted, in the background if the connection is down)."""
        hold = self._let_go()
        if hold is None:
            return
        try:
            self._leave(hold)
        finally:
            self._open_gate()

    def _let_go(self) -> _Hold | None:
        """A release's bookkeeping; the hold whose node to delete (None: an RLock re-entry)."""
        with self._mutex:
            hold = self._hold
            if hold is None:
                raise RecipeUsageError(f"release of {self!r}, which is not held")
            if self._spec.reentrant and hold.thread != threading.get_ident():
                raise RecipeUsageError(
                    f"{self!r} is held by thread {hold.thread_name!r}; only the holding thread "
                    f"may release a re-entrant {self._kind}"
                )
            hold.count -= 1
            if hold.count > 0:
                return None
            self._hold = None
            self._holds.remove(hold)
        sink = _metrics.sink
        if sink is not None and hold.since and self._spec.metric is not None:
            sink.released(self._spec.metric, self.path, time.monotonic() - hold.since)
        return hold

    def _leave(self, hold: _Hold) -> None:
        run_blocking(self._leave_steps(hold))

    def _leave_steps(self, hold: _Hold) -> Steps[None]:
        """Delete the node of a hold let go, as steps (_client/steps.py)."""
        try:
            # Deleted as its holder: on its session only. After LOST the node goes
            # with that session (closed on the server at the next connection).
            yield from self._queue.leave_steps(hold.entry)
        except ClientStateError:
            if not self.client.is_closed:
                raise
            # Closed: the session is gone, and our node with it.

    def cancel(self) -> None:
        """End every ``acquire()`` waiting on this object now: each returns False.

        A waiter queued on the server deletes its node. Acquires started
        after ``cancel()`` are not affected; a held lock stays held.
        """
        with self._mutex:
            cancel, self._cancel = self._cancel, Cancellation(self._stop)
            self._free.notify_all()
        cancel.set()

    def is_held(self) -> bool:
        """True while this process holds the lock for sure (not in doubt, not lost)."""
        hold = self._hold
        return hold is not None and is_sure(self.client, hold)

    def check(self) -> None:
        """Raise LockLost if the lock was lost; call it before writes in long critical sections.

        It raises from the moment the session is lost (declared by the client
        before the server can give the lock to anyone else) or the client is
        closed; while the connection is only SUSPENDED it passes.
        """
        hold = self._hold
        if hold is None:
            raise RecipeUsageError(f"{self!r} is not held")
        if not is_valid(self.client, hold):
            why = "its client was closed" if self.client.is_closed else "its ZooKeeper session"
            raise LockLost(
                f"{self._kind} {self.path} was lost with {why}; another process may hold it now"
            )

    @property
    def fencing_token(self) -> int:
        """The czxid of our node: pass it to storage so it can refuse stale holders."""
        hold = self._hold
        if hold is None:
            raise RecipeUsageError(f"{self!r} is not held: there is no fencing token")
        return hold.entry.czxid

    @property
    def node(self) -> str | None:
        """Path of our node while held."""
        hold = self._hold
        return hold.entry.path if hold is not None else None

    def on_lost(self, callback: Callable[[Self], object]) -> None:
        """Call ``callback(lock)`` when a held lock is lost (in order, on a thread of its own)."""
        self._loss.add(callback)

    def contenders(self) -> list[Contender]:
        """Every node queued on this path, holder first, with owner metadata."""
        paths = [self._queue.node_path(n) for n in self._queue.participants()]
        return [
            Contender(path, Owner.from_bytes(data), index == 0)
            for index, (path, data) in enumerate(read_nodes(self.client, paths))
        ]

    def statistics(self) -> LockStatistics:
        """A snapshot of this lock object (see LockStatistics)."""
        hold = self._hold
        client = self.client
        return LockStatistics(
            path=self.path,
            held=self.is_held(),
            in_doubt=bool(hold and is_in_doubt(client, hold)),
            lost=bool(hold and not is_valid(client, hold)),
            node=hold.entry.path if hold else None,
            fencing_token=hold.entry.czxid if hold else None,
            holder_thread=hold.thread_name if hold else None,
            depth=hold.count if hold else 0,
            acquisitions=self._acquisitions,
            timeouts=self._timeouts,
            losses=self._loss.count,
            refusal=self._refusal,
            session_id=hold.entry.session_id if hold else None,
        )

    def __repr__(self) -> str:
        hold = self._hold
        if hold is None:
            state = "unlocked"
        elif not is_valid(self.client, hold):
            state = "LOST"
        elif not is_sure(self.client, hold):
            state = "in doubt"
        else:
            state = f"held by {hold.thread_name!r} token={hold.entry.czxid}"
        if self._waiting:
            state += f" waiting={self._waiting}"
        return f"<{self._kind} {self.path} {state}>"

    # -- internals -------------------------------------------------------
    def _take(self, deadline: float | None, cancel: Cancellation) -> Entry | None:
        """Queue up and wait for our turn (a read lock taken by its writer overrides this)."""
        return run_blocking(self._take_steps(deadline, cancel))

    def _take_steps(self, deadline: float | None, cancel: Cancellation) -> Steps[Entry | None]:
        """``_take`` as steps (_client/steps.py): what the asyncio form awaits."""
        data = self._node_data
        if data is None:
            data = Owner.here_bytes(self.identifier)
        return self._queue.acquire_steps(
            data, deadline, self._spec.rule, head_shortcut=self._spec.head_shortcut, cancel=cancel
        )

    def _open_gate(self) -> None:
        with self._mutex:
            self._busy = False
            self._free.notify()

    def _refused(
        self, blocking: bool, cancel: Cancellation, why: str, *, unreached: bool = False
    ) -> None:
        """Record why an acquire returns False; count and log it (a cancelled one is neither)."""
        self._refusal = "cancelled" if cancel.is_set() else "unreachable" if unreached else "held"
        metric = self._spec.metric
        if metric is None or cancel.is_set():
            return
        sink = _metrics.sink
        if sink is not None:
            sink.refused(metric, self.path, not blocking)
        if blocking:
            log.info(
                "%s %s not acquired before the timeout",
                self._kind,
                self.path,
                extra=hold_fields("lock.timeout", metric, self.path),
            )
        elif log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s %s is busy%s",
                self._kind,
                self.path,
                f" ({why})" if why else "",
                extra=hold_fields("lock.busy", metric, self.path),
            )

    def _holds_lost(self, holds: list[_Hold]) -> None:
        # Decide first, talk later: ``lost`` is set and the callbacks are on their
        # way before a word is logged (a log stream may block).
        self._loss.fire(len(holds))
        metric = self._spec.metric or self._kind
        if self.client.is_closed:
            # Closing the client ends every hold: the user's doing, not a loss to count.
            for hold in holds:
                log.info(
                    "%s %s ended by closing its client",
                    self._kind,
                    self.path,
                    extra=hold_fields("lock.closed", metric, self.path, hold.entry),
                )
            return
        sink = _metrics.sink
        if sink is not None and self._spec.metric is not None:
            sink.lost(self._spec.metric, self.path, len(holds))
        for hold in holds:
            log.warning(
                "%s %s LOST with session %#x",
                self._kind,
                self.path,
                hold.entry.session_id,
                extra=hold_fields("lock.lost", metric, self.path, hold.entry),
            )


@final
class Lock(_Mutex):
    """A fair, fenced, loss-aware distributed lock; not re-entrant (like ``threading.Lock``).

    ``Lock(client, "/locks/report", identifier=None)``: processes (and Java
    processes using Curator's InterProcessMutex on the same path) take it in
    the order they asked. Use it as ``with lock:`` (waits as long as it
    takes), ``with lock.acquired(timeout=5):`` (LockTimeout if not in time),
    or ``lock.acquire(blocking=True, timeout=None) -> bool`` and ``release()``.

    Parameters:
        client: a started ZkClient.
        path: the lock's directory (relative to the client's namespace);
            created as CONTAINER nodes, reaped by the server once empty.
        identifier: stored in our node's owner data (``contenders()`` shows
            it), e.g. a task id.

    While held: ``fencing_token`` (our node's czxid) for storage that can
    refuse stale writers; ``check()`` raises LockLost once the session is
    lost (before the server can let anyone else in); ``is_held()`` is False
    while the connection is SUSPENDED (in doubt); ``lost`` / ``on_lost``
    tell a loss as it happens. Re-entry from the holding thread raises
    RecipeUsageError instead of deadlocking (use RLock for that); any thread
    may release it, as with ``threading.Lock``. One object is one contender:
    threads sharing it queue locally. See docs/recipes/lock.md.
    """

    def __init__(self, client: ZkClient, path: str, *, identifier: str | None = None) -> None:
        super().__init__(client, path, LOCK_KIND, identifier=identifier)


@final
class RLock(_Mutex):
    """Like Lock, but re-entrant per thread: Curator's InterProcessMutex semantics.

    The holding thread may ``acquire()`` again (no request is sent; a count
    goes up) and must ``release()`` as often; only the holding thread may
    release it. Prefer Lock unless code you call may take the same lock
    again. Parameters as Lock. See docs/recipes/lock.md.
    """

    def __init__(self, client: ZkClient, path: str, *, identifier: str | None = None) -> None:
        super().__init__(client, path, RLOCK_KIND, identifier=identifier)
