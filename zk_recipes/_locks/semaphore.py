"""Semaphore: Curator's InterProcessSemaphoreV2 (SemaphoreMutex, on top, is semaphore_mutex.py).

Algorithm (Curator's, step for step): take the semaphore's internal mutex,
bounded by the remaining timeout → create our lease node(s) → loop
{ list ``leases/`` with a watch; a node of ours missing → the session was
lost: delete the rest, release the mutex, start again; the count of ALL
children ≤ max_leases → done; else wait for the watch, still holding the
mutex } → release the mutex. Only the mutex holder watches ``leases/``, so a
returned lease wakes one process (no herd) and waiters are served in the
mutex's FIFO order. ``acquire_leases(n)`` creates all n nodes under one
hold of the mutex and waits until they all fit: all or nothing (on timeout
or error every node it made is deleted).

Znodes (Curator 5 layout, so Java semaphores on the same path count the same
leases)::

    <path>/locks/_c_<uuid>-lock-<seq10>     the internal mutex (our Lock)
    <path>/leases/_c_<uuid>-lease-<seq10>   EPHEMERAL_SEQUENTIAL, one per lease

under CONTAINER parents; lease data is owner JSON (Curator ignores it).
``max_leases`` is per instance, as in Curator: each waiter compares the
global count with ITS limit, so give every process the same one.

Holding: a lease's fencing token is its node's czxid (leases are made under
the mutex, so tokens grow). SUSPENDED puts held leases in doubt; LOST (or a
new session) loses them: ``lost`` is set, ``on_lost`` callbacks run and
``check()`` raises LockLost — the rules of every hold (_internals/holding.py).
A failure to make a lease node (connection lost, session expired) is ridden
out until the deadline; if the session that holds the internal mutex was
lost meanwhile, the acquire starts again from the mutex.

Threads: like ``threading.Semaphore``, any thread may ``release()``; it gives
back one lease this object holds (preferring the last one the calling
thread took with ``acquire()``). Several threads of one object queue locally
on the internal mutex; ``cancel()`` ends every acquire waiting on the
object.

Size: over the house limit (tests/test_module_sizes.py): the acquire loop, the
give-back and the loss accounting share one guard and one record of holds
(InterProcessSemaphoreV2 is ~420 lines of Java); the Lease a caller holds and
the statistics live in lease.py.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

from zk_recipes import _metrics, _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import Steps, reply_steps, run_blocking
from zk_recipes._deadline import acquire_deadline, expired, remaining
from zk_recipes._errors import (
    ClientStateError,
    ConfigurationError,
    LockLost,
    NoNodeError,
    RecipeUsageError,
    RetriesExhaustedError,
    SessionLost,
    WrongTypeError,
)
from zk_recipes._internals.args import optional_str, require_client, require_int
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.contenders import ContenderQueue, Entry, is_live
from zk_recipes._internals.holding import (
    HeldNodes,
    LossSignal,
    hold_fields,
    is_in_doubt,
    is_sure,
    is_valid,
    read_nodes,
)
from zk_recipes._internals.locklike import LockVerbs
from zk_recipes._internals.patience import Expired, patient_steps
from zk_recipes._internals.waits import NewWake, Sleep
from zk_recipes._locks.lease import Lease, SemaphoreStatistics, _LeaseHold
from zk_recipes._locks.lock import INNER_LOCK_KIND, _Mutex
from zk_recipes._types import Contender, Owner, Wakeable, WatchEvent

if TYPE_CHECKING:
    from typing_extensions import Self

log = logging.getLogger("zk_recipes.semaphore")

#: The ``recipe`` label of a SemaphoreMutex's metrics and logs.
MUTEX_RECIPE = "SemaphoreMutex"
LEASE_TOKEN = "lease-"
LOCKS_DIR = "locks"
LEASES_DIR = "leases"


class _Restart(Exception):
    """A lease node of ours, or the internal mutex, went with its session: start again."""


@final
class Semaphore(LockVerbs):
    """A counting semaphore over ZooKeeper: at most ``max_leases`` holders at once.

    ``Semaphore(client, "/pools/db", max_leases=5)``. ``with sem:`` takes one
    lease for the block; ``acquire(blocking=True, timeout=None) -> bool`` and
    ``release()`` as ``threading.Semaphore``; ``acquire_leases(n)`` takes n at
    once, all or none, as Lease objects. Curator's InterProcessSemaphoreV2 on
    the same path counts the same leases (give every process the same
    ``max_leases``: each compares the count with its own). Lease-holding
    rules (fencing token, in doubt, lost, ``check()``) are Lock's. See
    docs/recipes/semaphore.md.
    """

    _kind = "Semaphore"

    def __init__(
        self,
        client: ZkClient,
        path: str,
        max_leases: int,
        *,
        identifier: str | None = None,
    ) -> None:
        self.client: ZkClient = require_client(client, self._kind)
        self.path: str = _paths.validate_writable_path(path)
        self.max_leases = require_int(max_leases, "max_leases", minimum=1)
        self.identifier = optional_str(identifier, "identifier")
        self._mutex = _Mutex(
            client, _paths.join(self.path, LOCKS_DIR), INNER_LOCK_KIND, identifier=identifier
        )
        #: The ``recipe`` of its metrics and logs (``MUTEX_RECIPE`` under a SemaphoreMutex).
        self._metric = self._kind
        self._leases = ContenderQueue(client, _paths.join(self.path, LEASES_DIR), LEASE_TOKEN)
        self._guard = threading.Lock()
        #: Our leases' holds, oldest first: the one record of what this object holds.
        self._holds: HeldNodes[_LeaseHold] = HeldNodes(client, self._guard, self._leases_lost)
        self._loss: LossSignal[Any] = LossSignal(self, f"{self._kind} {self.path}")
        #: Set when a held lease was lost with its session (cleared by the next acquire).
        self.lost = self._loss.event
        self._cancel = Cancellation()
        self._waiting = 0
        self._acquisitions = 0
        self._timeouts = 0

    # -- public API ------------------------------------------------------
    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take one lease; False only if not acquired in time (or at once, non-blocking)."""
        deadline = acquire_deadline(blocking, timeout)
        return bool(self._acquire(1, deadline, threading.get_ident(), blocking))

    def acquire_leases(
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
        return self._acquire(count, deadline, None, blocking)

    def release(self) -> None:
        """Give back one lease this object holds (any thread may, as with threading.Semaphore)."""
        self._delete_lease(self._pick(threading.get_ident()))

    def _pick(self, me: int) -> Lease:
        """The lease a release by ``me`` gives back (its own newest first), forgotten at once."""
        with self._guard:
            held = self._held()
            lease = next((x for x in reversed(held) if x._thread == me), None)
            if lease is None:
                lease = next((x for x in held if x._thread is not None), None)
            if lease is None and held:
                lease = held[0]
            if lease is not None:
                self._detach(lease)  # picked and forgotten at once: two releases give back two
        if lease is None:
            raise RecipeUsageError(f"release of {self!r}, which is not held (it has no lease)")
        return lease

    def cancel(self) -> None:
        """End every ``acquire()`` waiting on this object now: each returns False (or [])."""
        with self._guard:
            cancel, self._cancel = self._cancel, Cancellation()
        cancel.set()
        self._mutex.cancel()

    def is_held(self) -> bool:
        """True while this object holds at least one lease for sure (not in doubt, not lost)."""
        return any(is_sure(self.client, x._hold) for x in self.leases)

    def check(self) -> None:
        """Raise LockLost if a lease this object holds was lost with its session."""
        held = self.leases
        if not held:
            raise RecipeUsageError(f"{self!r} is not held")
        if any(not is_valid(self.client, x._hold) for x in held):
            raise LockLost(
                f"a lease of {self._kind} {self.path} was lost with its ZooKeeper session; "
                "another process may hold it now"
            )

    @property
    def fencing_token(self) -> int:
        """Token of the lease this thread took last with ``acquire()`` (else the newest held)."""
        me = threading.get_ident()
        with self._guard:
            held = self._held()
            lease = next((x for x in reversed(held) if x._thread == me), None)
            if lease is None and held:
                lease = held[-1]
        if lease is None:
            raise RecipeUsageError(f"{self!r} is not held: there is no fencing token")
        return lease.fencing_token

    @property
    def leases(self) -> list[Lease]:
        """The leases this object holds now, oldest first."""
        with self._guard:
            return self._held()

    def on_lost(self, callback: Callable[[Self], object]) -> None:
        """Call ``callback(semaphore)`` when a held lease is lost (on a thread of ours)."""
        self._loss.add(callback)

    @property
    def waiting(self) -> int:
        """Threads inside ``acquire()`` on this object now."""
        return self._waiting

    def participants(self) -> list[str]:
        """Paths of every lease node (holders, and the pending ones of the mutex holder)."""
        return [self._leases.node_path(n) for n in self._leases.participants()]

    def contenders(self) -> list[Contender]:
        """Lease nodes (the first ``max_leases`` marked as holders), then the mutex queue.

        The head of the mutex queue is represented by its pending lease node(s),
        so each acquirer appears once.
        """
        leases = read_nodes(self.client, self.participants())
        result = [
            Contender(path, Owner.from_bytes(data), index < self.max_leases)
            for index, (path, data) in enumerate(leases)
        ]
        waiting = self._mutex.contenders()[1:]
        return result + [dataclasses.replace(c, is_holder=False) for c in waiting]

    def statistics(self) -> SemaphoreStatistics:
        """A snapshot of this semaphore object (see SemaphoreStatistics)."""
        held = self.leases
        client = self.client
        return SemaphoreStatistics(
            path=self.path,
            max_leases=self.max_leases,
            leases=len(held),
            in_doubt=sum(is_in_doubt(client, x._hold) for x in held),
            lost=sum(not is_valid(client, x._hold) for x in held),
            fencing_tokens=tuple(x.fencing_token for x in held),
            waiting=self._waiting,
            acquisitions=self._acquisitions,
            timeouts=self._timeouts,
            losses=self._loss.count,
        )

    def __repr__(self) -> str:
        held = self.leases
        state = f"holding={len(held)}"
        lost = sum(not is_valid(self.client, x._hold) for x in held)
        if lost:
            state += f" ({lost} LOST)"
        if self._waiting:
            state += f" waiting={self._waiting}"
        return f"<{self._kind} {self.path} max={self.max_leases} {state}>"

    # -- acquiring -------------------------------------------------------
    def _acquire(
        self, count: int, deadline: float | None, thread: int | None, blocking: bool
    ) -> list[Lease]:
        began, cancel = self._begin()
        try:
            entries = self._acquire_entries(count, deadline, cancel)
        finally:
            self._done_waiting()
        return self._granted(entries, thread, began, blocking, cancel)

    def _begin(self, cancel: Cancellation | None = None) -> tuple[float, Cancellation]:
        """An acquire starts: (when, for the metrics; the object's cancellation, or ``cancel``)."""
        began = time.monotonic() if _metrics.sink is not None else 0.0
        self.client.check_usable()  # fail fast when the client is closed or forked
        with self._guard:
            self._waiting += 1
            return began, self._cancel if cancel is None else cancel

    def _done_waiting(self) -> None:
        with self._guard:
            self._waiting -= 1

    def _granted(
        self,
        entries: list[Entry],
        thread: int | None,
        began: float,
        blocking: bool,
        cancel: Cancellation,
    ) -> list[Lease]:
        """An acquire's end: its leases recorded and counted (none: a refusal recorded)."""
        if not entries:
            with self._guard:
                self._timeouts += 1
            if not cancel.is_set():
                self._refused(blocking)
            return []
        leases = [Lease(self, entry, thread) for entry in entries]
        with self._guard:
            self._acquisitions += len(leases)
            if all(is_valid(self.client, x._hold) for x in [*self._held(), *leases]):
                self.lost.clear()
        for lease in leases:
            self._holds.add(lease._hold)  # a loss in the meantime is caught here
        sink = _metrics.sink
        if sink is not None:
            now = time.monotonic()
            for lease in leases:
                lease._hold.since = now
            sink.acquired(self._metric, self.path, now - began, len(leases))
        return leases

    def _refused(self, blocking: bool) -> None:
        sink = _metrics.sink
        if sink is not None:
            sink.refused(self._metric, self.path, not blocking)
        if blocking:
            log.info(
                "%s %s: no lease before the timeout",
                self._metric,
                self.path,
                extra=hold_fields("lock.timeout", self._metric, self.path),
            )
        elif log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s %s is busy (every lease is held)",
                self._metric,
                self.path,
                extra=hold_fields("lock.busy", self._metric, self.path),
            )

    def _acquire_entries(
        self, count: int, deadline: float | None, cancel: Cancellation
    ) -> list[Entry]:
        while True:
            if cancel.is_set() or not self._mutex.acquire(timeout=remaining(deadline)):
                return []
            try:
                return self._lease_under_mutex(count, deadline, cancel)
            except _Restart:
                log.info("a lease node of %s was lost with its session; starting again", self.path)
                if _over(deadline, cancel):
                    return []
            finally:
                self._mutex.release()

    def _lease_under_mutex(
        self, count: int, deadline: float | None, cancel: Cancellation
    ) -> list[Entry]:
        return run_blocking(self._lease_steps(count, deadline, cancel, self._mutex))

    def _lease_steps(
        self, count: int, deadline: float | None, cancel: Cancellation, mutex: _Mutex
    ) -> Steps[list[Entry]]:
        """Under ``mutex`` (held): make ``count`` lease nodes and wait until they all fit.

        As steps (_client/steps.py): the sync acquire runs them blocking, the
        asyncio form awaits them under its own internal mutex. Raises _Restart
        when a node of ours, or ``mutex``'s hold, went with its session.
        """
        created: list[Entry] = []
        try:
            data = Owner.here_bytes(self.identifier)
            children: list[str] | None = None
            for _ in range(count):
                entered = yield from self._enter_lease_steps(data, deadline, cancel, mutex)
                if entered is None:
                    yield from self._delete_steps(created)
                    return []
                entry, children = entered
                created.append(entry)
            woken = False
            wake: Any = None
            while True:
                if children is not None:
                    there = self._all_there(created, children)
                    if there and len(children) <= self.max_leases:
                        return created
                    if not there:
                        raise _Restart
                if _over(deadline, cancel):
                    yield from self._delete_steps(created)
                    return []
                if children is None or wake is None or woken:
                    # Look again with a watch armed; the fresh list is checked first.
                    wake = yield NewWake()
                    children = yield from self._list_watched_steps(deadline, wake, cancel)
                    woken = False
                    continue
                # Any event (a child change, kazoo's NONE after a disconnect, closing the
                # client, cancel()) means: look again.
                with self.client.wake_on_close(wake), cancel.wakes(wake):
                    woken = yield Sleep(wake, remaining(deadline))
        except GeneratorExit:
            raise
        except BaseException:
            yield from self._delete_steps(created)
            raise

    def _enter_lease_steps(
        self, data: bytes, deadline: float | None, cancel: Cancellation, mutex: _Mutex
    ) -> Steps[tuple[Entry, list[str] | None] | None]:
        """One lease node, riding out connection trouble until the deadline (None: gave up).

        Raises _Restart once the session holding the internal mutex is gone.
        """

        def send(_limit: float) -> Steps[tuple[Entry, list[str] | None]]:
            hold = mutex._hold
            if hold is None or not is_valid(self.client, hold):
                raise _Restart
            return self._leases.enter_steps(data)

        try:
            return (
                yield from patient_steps(
                    self.client,
                    deadline,
                    send,
                    cancel=cancel,
                    also=(RetriesExhaustedError,),
                    what=f"making a lease node in {self.path}",
                )
            )
        except Expired:
            return None

    def _all_there(self, created: list[Entry], children: list[str]) -> bool:
        names = set(children)
        return all(e.name in names and is_live(self.client, e) for e in created)

    def _list_watched_steps(
        self, deadline: float | None, wake: Wakeable, cancel: Cancellation
    ) -> Steps[list[str] | None]:
        """The lease nodes, with a watch that sets ``wake``; None once the deadline passed."""

        def watch(_event: WatchEvent) -> None:
            wake.set()

        def send(limit: float) -> Steps[list[str]]:
            pending = self.client.get_children_async(self._leases.path, watch=watch)
            return reply_steps(pending, limit)

        try:
            return (
                yield from patient_steps(
                    self.client, deadline, send, cancel=cancel, through_session_loss=False
                )
            )
        except (NoNodeError, SessionLost):
            raise _Restart from None  # our nodes (and their container) are gone
        except Expired:
            return None

    def _delete_steps(self, entries: list[Entry]) -> Steps[None]:
        for entry in entries:
            try:
                yield from self.client.delete_steps(
                    entry.path, guaranteed=True, session=entry.session_id, czxid=entry.czxid
                )
            except ClientStateError:
                pass  # closed client: its session (and so our ephemeral node) is gone
            except Exception:
                log.warning("could not delete lease node %s", entry.path, exc_info=True)
        entries.clear()

    # -- holding ---------------------------------------------------------
    def _held(self) -> list[Lease]:
        """The leases held now, oldest first (call with the guard held)."""
        return [hold.lease for hold in self._holds.held]

    def _give_back(self, lease: Lease) -> None:
        with self._guard:
            if lease.closed:
                return
            self._detach(lease)
        self._delete_lease(lease)

    def _detach(self, lease: Lease) -> None:
        """Forget ``lease`` (call with the guard held)."""
        lease.closed = True
        self._holds.remove(lease._hold)

    def _delete_lease(self, lease: Lease) -> None:
        run_blocking(self._delete_lease_steps(lease))

    def _delete_lease_steps(self, lease: Lease) -> Steps[None]:
        """Delete a lease's node, as its holder (steps: the asyncio form awaits them)."""
        sink = _metrics.sink
        since = lease._hold.since
        if sink is not None and since:
            sink.released(self._metric, self.path, time.monotonic() - since)
        # The name is unique (protected uuid + sequence): never another holder's node.
        # Deleted as its holder all the same (the house rule): after its session, nothing.
        entry = lease.entry
        try:
            yield from self.client.delete_steps(
                entry.path, guaranteed=True, session=entry.session_id, czxid=entry.czxid
            )
        except ClientStateError:
            if not self.client.is_closed:
                raise
            # Closed: the session is gone, and the lease node with it.

    def _leases_lost(self, holds: list[_LeaseHold]) -> None:
        # Decide first, talk later: ``lost`` is set and the callbacks are on their
        # way before a word is logged (a log stream may block).
        self._loss.fire(len(holds))
        if self.client.is_closed:
            # Closing the client ends every hold: the user's doing, not a loss to count.
            for hold in holds:
                log.info(
                    "lease %s of %s ended by closing its client",
                    hold.entry.path,
                    self.path,
                    extra=hold_fields("lock.closed", self._metric, self.path, hold.entry),
                )
            return
        sink = _metrics.sink
        if sink is not None:
            sink.lost(self._metric, self.path, len(holds))
        for hold in holds:
            log.warning(
                "lease %s of %s LOST with session %#x",
                hold.entry.path,
                self.path,
                hold.entry.session_id,
                extra=hold_fields("lock.lost", self._metric, self.path, hold.entry),
            )


def _over(deadline: float | None, cancel: Cancellation) -> bool:
    return cancel.is_set() or expired(deadline)


def mutex_semaphore(client: ZkClient, path: str, *, identifier: str | None) -> Semaphore:
    """The one-lease Semaphore under a SemaphoreMutex, named so in its metrics and logs."""
    semaphore = Semaphore(client, path, 1, identifier=identifier)
    semaphore._metric = MUTEX_RECIPE
    return semaphore
