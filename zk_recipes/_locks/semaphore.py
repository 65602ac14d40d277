"""Semaphore and SemaphoreMutex: Curator's InterProcessSemaphoreV2 and InterProcessSemaphoreMutex.

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
``check()`` raises LockLost — the same rules as Lock (_locks/lock.py node_lost_by).

Threads: like ``threading.Semaphore``, any thread may ``release()``; it gives
back one lease this object holds (preferring the last one the calling
thread took with ``acquire()``). Several threads of one object queue locally
on the internal mutex. SemaphoreMutex is the 1-lease lock on top: not
re-entrant (re-entry raises instead of deadlocking), released by any thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.kazoo import WatchEvent
from zk_recipes._client.states import StateChange
from zk_recipes._deadline import acquire_deadline, request_timeout
from zk_recipes._errors import (
    ClientStateError,
    ConnectionLostError,
    LockLost,
    NoNodeError,
    RecipeUsageError,
    SessionLost,
    ZkTimeoutError,
)
from zk_recipes._internals.contenders import ContenderQueue, Entry
from zk_recipes._internals.locklike import LockVerbs
from zk_recipes._locks.lock import (
    Contender,
    Lock,
    LockStatistics,
    _parse_owner,
    node_in_doubt,
    node_lost_by,
    owner_data,
)

log = logging.getLogger("zk_recipes.semaphore")

LEASE_TOKEN = "lease-"
LOCKS_DIR = "locks"
LEASES_DIR = "leases"

SemaphoreLostCallback = Callable[["Semaphore"], object]


@dataclasses.dataclass(frozen=True)
class SemaphoreStatistics:
    path: str
    max_leases: int
    #: Leases this object holds now.
    leases: int
    in_doubt: int
    lost: int
    fencing_tokens: tuple[int, ...]
    #: Threads inside acquire() on this object.
    waiting: int
    acquisitions: int
    timeouts: int
    losses: int


class Lease:
    """One lease of a Semaphore (a node in ``<path>/leases``); ``close()`` gives it back.

    A context manager. ``lost`` turns True when the lease was lost with the
    session, ``in_doubt`` while the connection is SUSPENDED.
    """

    def __init__(self, semaphore: Semaphore, entry: Entry, thread: int | None) -> None:
        self._semaphore = semaphore
        self.entry = entry
        self.in_doubt = False
        self.lost = False
        self.closed = False
        #: The thread that took it with ``acquire()`` (None: ``acquire_leases``).
        self._thread = thread

    @property
    def path(self) -> str:
        """The lease node's path (relative to the client's namespace)."""
        return self.entry.path

    @property
    def fencing_token(self) -> int:
        """The lease node's czxid: strictly increasing across the ensemble."""
        return self.entry.czxid

    def close(self) -> None:
        """Give the lease back (guaranteed delete). Closing twice does nothing."""
        self._semaphore._give_back(self)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = (
            "closed" if self.closed else "LOST" if self.lost else f"held token={self.entry.czxid}"
        )
        return f"<Lease {self.entry.path} {state}>"


class _Restart(Exception):
    """A lease node of ours vanished (session lost): start the acquire again."""


class Semaphore(LockVerbs):
    """A counting semaphore over ZooKeeper: at most ``max_leases`` holders at once."""

    _kind = "Semaphore"

    def __init__(
        self,
        client: ZkClient,
        path: str,
        max_leases: int,
        *,
        identifier: str | None = None,
    ) -> None:
        if not isinstance(client, ZkClient):
            raise TypeError(f"{self._kind} needs a ZkClient, got {client!r}")
        if isinstance(max_leases, bool) or not isinstance(max_leases, int):
            raise TypeError(f"max_leases must be an int >= 1, got {max_leases!r}")
        if max_leases < 1:
            raise ValueError(f"max_leases must be >= 1, got {max_leases!r}")
        self.client: ZkClient = client
        self.path: str = _paths.validate_writable_path(path)
        self.max_leases = max_leases
        self.identifier = identifier
        self._mutex = Lock(client, _paths.join(self.path, LOCKS_DIR), identifier=identifier)
        self._leases = ContenderQueue(client, _paths.join(self.path, LEASES_DIR), LEASE_TOKEN)
        self._guard = threading.Lock()
        self._held: list[Lease] = []
        self.lost = threading.Event()
        self._on_lost: list[SemaphoreLostCallback] = []
        self._listening = False
        self._waiting = 0
        self._acquisitions = 0
        self._timeouts = 0
        self._losses = 0

    # -- public API ------------------------------------------------------
    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take one lease; False only if not acquired in time (or at once, non-blocking)."""
        deadline = acquire_deadline(blocking, timeout)
        return bool(self._acquire(1, deadline, threading.get_ident()))

    def acquire_leases(
        self, count: int = 1, *, blocking: bool = True, timeout: float | None = None
    ) -> list[Lease]:
        """Take ``count`` leases at once (all or none); an empty list if not in time."""
        deadline = acquire_deadline(blocking, timeout)
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"count must be an int, got {count!r}")
        if not 1 <= count <= self.max_leases:
            raise ValueError(
                f"count must be between 1 and max_leases ({self.max_leases}), got {count}: "
                "more leases than the limit could never be granted"
            )
        return self._acquire(count, deadline, None)

    def release(self) -> None:
        """Give back one lease this object holds (any thread may, as with threading.Semaphore)."""
        me = threading.get_ident()
        with self._guard:
            lease = next((x for x in reversed(self._held) if x._thread == me), None)
            if lease is None:
                lease = next((x for x in self._held if x._thread is not None), None)
            if lease is None and self._held:
                lease = self._held[0]
            stop = self._detach(lease) if lease is not None else False
        if lease is None:
            raise RecipeUsageError(f"release of {self!r}, which is not held (it has no lease)")
        self._delete_lease(lease, stop)

    def is_held(self) -> bool:
        """True while this object holds at least one lease for sure (not in doubt, not lost)."""
        with self._guard:
            held = list(self._held)
        return any(not x.lost and not node_in_doubt(self.client, x) for x in held)

    def check(self) -> None:
        """Raise LockLost if a lease this object holds was lost with its session."""
        with self._guard:
            held = list(self._held)
        if not held:
            raise RecipeUsageError(f"{self!r} is not held")
        if any(x.lost or x.entry.session_id != self.client.session_id for x in held):
            raise LockLost(
                f"a lease of {self._kind} {self.path} was lost with its ZooKeeper session; "
                "another process may hold it now"
            )

    @property
    def fencing_token(self) -> int:
        """Token of the lease this thread took last with ``acquire()`` (else the newest held)."""
        me = threading.get_ident()
        with self._guard:
            lease = next((x for x in reversed(self._held) if x._thread == me), None)
            if lease is None and self._held:
                lease = self._held[-1]
        if lease is None:
            raise RecipeUsageError(f"{self!r} is not held: there is no fencing token")
        return lease.fencing_token

    @property
    def leases(self) -> list[Lease]:
        """The leases this object holds now, oldest first."""
        with self._guard:
            return list(self._held)

    def on_lost(self, callback: SemaphoreLostCallback) -> None:
        """Call ``callback(semaphore)`` (on a listener thread) when a held lease is lost."""
        self._on_lost.append(callback)

    def participants(self) -> list[str]:
        """Paths of every lease node (holders, and the pending ones of the mutex holder)."""
        return [self._leases.node_path(n) for n in self._leases.participants()]

    def contenders(self) -> list[Contender]:
        """Lease nodes (the first ``max_leases`` marked as holders), then the mutex queue.

        The head of the mutex queue is represented by its pending lease node(s),
        so each acquirer appears once.
        """
        names = self._leases.participants()
        pending = [self.client.get_async(self._leases.node_path(n)) for n in names]
        result: list[Contender] = []
        for name, request in zip(names, pending, strict=True):
            try:
                data, _ = request.result(self.client.settings.connection_timeout)
            except NoNodeError:
                continue
            holder = len(result) < self.max_leases
            result.append(Contender(self._leases.node_path(name), _parse_owner(data), holder))
        waiting = self._mutex.contenders()[1:]
        return result + [dataclasses.replace(c, is_holder=False) for c in waiting]

    def statistics(self) -> SemaphoreStatistics:
        with self._guard:
            held = list(self._held)
        return SemaphoreStatistics(
            path=self.path,
            max_leases=self.max_leases,
            leases=len(held),
            in_doubt=sum(not x.lost and node_in_doubt(self.client, x) for x in held),
            lost=sum(x.lost for x in held),
            fencing_tokens=tuple(x.fencing_token for x in held),
            waiting=self._waiting,
            acquisitions=self._acquisitions,
            timeouts=self._timeouts,
            losses=self._losses,
        )

    def __repr__(self) -> str:
        with self._guard:
            held = list(self._held)
        state = f"holding={len(held)}"
        lost = sum(x.lost for x in held)
        if lost:
            state += f" ({lost} LOST)"
        if self._waiting:
            state += f" waiting={self._waiting}"
        return f"<{self._kind} {self.path} max={self.max_leases} {state}>"

    # -- acquiring -------------------------------------------------------
    def _acquire(self, count: int, deadline: float | None, thread: int | None) -> list[Lease]:
        self.client._usable()  # fail fast when the client is closed or forked
        with self._guard:
            self._waiting += 1
        try:
            entries = self._acquire_entries(count, deadline)
        finally:
            with self._guard:
                self._waiting -= 1
        if not entries:
            with self._guard:
                self._timeouts += 1
            return []
        leases = [Lease(self, entry, thread) for entry in entries]
        with self._guard:
            self._held.extend(leases)
            self._acquisitions += count
            if not any(x.lost for x in self._held):
                self.lost.clear()
            listen = not self._listening
            self._listening = True
        if listen:
            self.client.add_listener(self._on_state)
        # Lost in the meantime?
        self._mark_lost([x for x in leases if x.entry.session_id != self.client.session_id])
        return leases

    def _acquire_entries(self, count: int, deadline: float | None) -> list[Entry]:
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._mutex.acquire(timeout=remaining):
                return []
            try:
                return self._lease_under_mutex(count, deadline)
            except _Restart:
                log.info("a lease node of %s was lost with its session; starting again", self.path)
                if deadline is not None and time.monotonic() >= deadline:
                    return []
            finally:
                self._mutex.release()

    def _lease_under_mutex(self, count: int, deadline: float | None) -> list[Entry]:
        created: list[Entry] = []
        try:
            data = owner_data(self.identifier)
            children: list[str] = []
            for _ in range(count):
                entry, children = self._leases.enter(data)
                created.append(entry)
            changed: threading.Event | None = None
            while True:
                there = self._all_there(created, children)
                if there and len(children) <= self.max_leases:
                    return created
                if deadline is not None and time.monotonic() >= deadline:
                    self._delete(created)
                    return []
                if not there:
                    raise _Restart
                if changed is None or changed.is_set():
                    # Look again with a watch armed; the fresh list is checked first.
                    changed = threading.Event()
                    children = self._list_watched(deadline, changed)
                    continue
                # Any event (a child change, kazoo's NONE after a disconnect, closing the
                # client) means: look again.
                with self.client.wake_on_close(changed):
                    changed.wait(
                        None if deadline is None else max(0.0, deadline - time.monotonic())
                    )
        except BaseException:
            self._delete(created)
            raise

    def _all_there(self, created: list[Entry], children: list[str]) -> bool:
        session = self.client.session_id
        names = set(children)
        return all(e.name in names and e.session_id == session for e in created)

    def _list_watched(self, deadline: float | None, changed: threading.Event) -> list[str]:
        def wake(_event: WatchEvent) -> None:
            changed.set()

        while True:
            try:
                return self.client.get_children_async(self._leases.path, watch=wake).result(
                    request_timeout(self.client.settings.connection_timeout, deadline)
                )
            except (NoNodeError, SessionLost):
                raise _Restart from None  # our nodes (and their container) are gone
            except (ConnectionLostError, ZkTimeoutError):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return []  # the caller sees the deadline
                self.client.wait_connected(min(1.0, remaining) if remaining else 1.0)

    def _delete(self, entries: list[Entry]) -> None:
        for entry in entries:
            try:
                self.client.delete(entry.path, guaranteed=True)
            except ClientStateError:
                pass  # closed client: its session (and so our ephemeral node) is gone
            except Exception:
                log.warning("could not delete lease node %s", entry.path, exc_info=True)
        entries.clear()

    # -- holding ---------------------------------------------------------
    def _give_back(self, lease: Lease) -> None:
        with self._guard:
            if lease.closed:
                return
            stop = self._detach(lease)
        self._delete_lease(lease, stop)

    def _detach(self, lease: Lease) -> bool:
        """Forget ``lease`` (call with the guard held); True when the last one went."""
        lease.closed = True
        with contextlib.suppress(ValueError):
            self._held.remove(lease)
        stop = self._listening and not self._held
        if stop:
            self._listening = False
        return stop

    def _delete_lease(self, lease: Lease, stop_listening: bool) -> None:
        if stop_listening:
            self.client.remove_listener(self._on_state)
        # The name is unique (protected uuid + sequence): never another holder's node.
        self.client.delete(lease.path, guaranteed=True)

    def _on_state(self, change: StateChange) -> None:
        with self._guard:
            held = [x for x in self._held if not x.lost]
        self._mark_lost([x for x in held if node_lost_by(self.client, x, change)])

    def _mark_lost(self, leases: list[Lease]) -> None:
        """Mark leases lost, then set ``lost`` and run the callbacks once for them all."""
        with self._guard:
            newly = [x for x in leases if not x.lost]
            for lease in newly:
                lease.lost = True
                lease.in_doubt = False
            self._losses += len(newly)
        if not newly:
            return
        for lease in newly:
            log.warning(
                "lease %s of %s LOST with session %#x",
                lease.path,
                self.path,
                lease.entry.session_id,
            )
        self.lost.set()
        for callback in list(self._on_lost):
            try:
                callback(self)
            except Exception:
                log.exception("error in an on_lost callback of %s", self.path)


MutexLostCallback = Callable[["SemaphoreMutex"], object]


class SemaphoreMutex(LockVerbs):
    """A non-re-entrant lock: a Semaphore with one lease (Curator's InterProcessSemaphoreMutex).

    Unlike Lock, which is one contender per object, threads of one process
    using the same SemaphoreMutex each queue for the lease. Any thread may
    release it.
    """

    _kind = "SemaphoreMutex"

    def __init__(self, client: ZkClient, path: str, *, identifier: str | None = None) -> None:
        self._semaphore = Semaphore(client, path, 1, identifier=identifier)
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

    def is_held(self) -> bool:
        """True while this process holds the lock for sure (not in doubt, not lost)."""
        lease = self._lease
        return lease is not None and not lease.lost and not node_in_doubt(self.client, lease)

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

    def on_lost(self, callback: MutexLostCallback) -> None:
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
            in_doubt=bool(lease and not lease.lost and node_in_doubt(self.client, lease)),
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
        elif node_in_doubt(self.client, lease):
            state = "in doubt"
        else:
            state = f"held by {holder[1] if holder else '?'!r} token={lease.fencing_token}"
        waiting = self._semaphore._waiting
        if waiting:
            state += f" waiting={waiting}"
        return f"<{self._kind} {self.path} {state}>"
