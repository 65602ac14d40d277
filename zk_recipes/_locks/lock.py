"""Lock and RLock: Curator's InterProcessMutex, fenced and loss-aware.

Algorithm: the contender queue (_internals/contenders.py) with the mutex rule: a
contender holds the lock while it is first by sequence number and waits on
its immediate predecessor otherwise. An uncontended acquire+release costs
three requests in two round trips (create pipelined with the children read,
then the delete).

Znodes (Curator 5 layout, so Java InterProcessMutex holders and ours exclude
each other on one path): ``<path>/_c_<uuid>-lock-<seq10>``, EPHEMERAL_SEQUENTIAL,
under CONTAINER parents. Data is small JSON owner metadata (host, pid, thread,
since, optional id), which Curator ignores.

Holding:

- The fencing token is our node's czxid: strictly increasing across the
  ensemble, so storage can refuse a write carrying an older token.
- SUSPENDED puts the lock *in doubt*: ``is_held()`` is False until
  RECONNECTED on the same session finds our node still there.
- LOST (the server expired the session, or the client declared it lost after
  too long without a reply) sets ``lost``, runs the ``on_lost`` callbacks and
  makes ``check()`` raise LockLost. Another process may hold the lock now;
  ``release()`` then only forgets it locally and never deletes a node that is
  not ours.

Threads: one Lock object is one contender per process. Other threads that
call ``acquire()`` on the same object wait locally (no extra nodes, no herd).
``Lock`` is not re-entrant: re-entry from the holding thread raises
RecipeUsageError instead of deadlocking; like ``threading.Lock`` any thread
may release it. ``RLock`` counts re-entries per thread, as Curator does, and
only the holding thread may release it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import ConnectionState, StateChange
from zk_recipes._deadline import acquire_deadline
from zk_recipes._errors import (
    ConnectionLostError,
    LockLost,
    NoNodeError,
    RecipeUsageError,
    ZkTimeoutError,
)
from zk_recipes._internals.contenders import ContenderQueue, Entry, Rule, first_in_line
from zk_recipes._internals.locklike import LockVerbs

log = logging.getLogger("zk_recipes.lock")

LOCK_TOKEN = "lock-"
_HOST = socket.gethostname()

LostCallback = Callable[["Lock"], object]


@dataclasses.dataclass(frozen=True)
class Contender:
    """One node in a lock's queue, as ``contenders()`` reports it."""

    path: str
    #: Owner metadata written by zk-recipes (empty for other clients, e.g. Curator).
    owner: dict[str, Any]
    is_holder: bool


@dataclasses.dataclass(frozen=True)
class LockStatistics:
    path: str
    held: bool
    in_doubt: bool
    lost: bool
    node: str | None
    fencing_token: int | None
    holder_thread: str | None
    depth: int
    acquisitions: int
    timeouts: int
    losses: int


@dataclasses.dataclass
class _Hold:
    entry: Entry
    thread: int
    thread_name: str
    count: int = 1
    in_doubt: bool = False
    lost: bool = False


def owner_data(identifier: str | None) -> bytes:
    """Small JSON that tells people (and ``contenders()``) who is in the queue."""
    thread = threading.current_thread()
    owner: dict[str, Any] = {
        "host": _HOST,
        "pid": os.getpid(),
        "thread": thread.name,
        "since": round(time.time(), 3),
    }
    if identifier is not None:
        owner["id"] = identifier
    return json.dumps(owner, separators=(",", ":")).encode()


def _parse_owner(data: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(data) if data[:1] == b"{" else None
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {}


class HeldNode(Protocol):
    """A node this process holds (a lock's hold, a semaphore's lease)."""

    entry: Entry
    in_doubt: bool
    lost: bool


def node_in_doubt(client: ZkClient, held: HeldNode) -> bool:
    """True while nobody can tell whether ``held`` is still ours (SUSPENDED, other session)."""
    # The listener sets in_doubt a moment after the state changes; the
    # client's own state answers right away.
    if held.in_doubt or held.entry.session_id != client.session_id:
        return True
    state = client.state
    return state is None or not state.is_connected


def node_lost_by(client: ZkClient, held: HeldNode, change: StateChange) -> bool:
    """Apply a state change to ``held``; True when it is lost (the caller marks and reports it).

    SUSPENDED puts it in doubt; LOST or a new session loses it; reconnecting
    on the same session clears the doubt if the node is still ours.
    """
    if change.state is ConnectionState.SUSPENDED:
        held.in_doubt = True
        return False
    if change.state is ConnectionState.LOST or (
        change.state.is_connected and change.session_id != held.entry.session_id
    ):
        return True
    if change.state.is_connected and held.in_doubt:
        try:
            stat = client.exists(held.entry.path)
        except (ConnectionLostError, ZkTimeoutError):
            return False  # still in doubt; the next state change decides
        if stat is not None and stat.ephemeral_owner == held.entry.session_id:
            held.in_doubt = False
            return False
        return True
    return False


class _Mutex(LockVerbs):
    """What Lock, RLock and the read/write halves share."""

    _reentrant = False
    _token = LOCK_TOKEN
    _sort_tokens: tuple[str, ...] = (LOCK_TOKEN,)
    _kind = "Lock"

    def __init__(self, client: ZkClient, path: str, *, identifier: str | None = None) -> None:
        if not isinstance(client, ZkClient):
            raise TypeError(f"{self._kind} needs a ZkClient, got {client!r}")
        self.client = client
        self.path = _paths.validate_writable_path(path)
        self.identifier = identifier
        self._queue = ContenderQueue(client, self.path, self._token, sort_tokens=self._sort_tokens)
        self._gate = threading.Lock()
        self._mutex = threading.Lock()
        self._hold: _Hold | None = None
        self.lost = threading.Event()
        self._on_lost: list[LostCallback] = []
        self._acquisitions = 0
        self._timeouts = 0
        self._losses = 0
        self._waiting = 0

    # -- the rule (the read lock overrides it) ---------------------------
    def _rule(self) -> Rule:
        return first_in_line(1)

    _head_shortcut = True

    # -- public API ------------------------------------------------------
    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock; False only if it was not acquired in time (or at once, non-blocking)."""
        deadline = acquire_deadline(blocking, timeout)
        me = threading.get_ident()
        hold = self._hold
        if hold is not None and hold.thread == me:
            if self._reentrant:
                hold.count += 1
                return True
            raise RecipeUsageError(
                f"this thread already holds {self!r}: Lock is not re-entrant (re-acquiring "
                "would deadlock). Use RLock for re-entrant locking, or release first."
            )
        self.client._usable()  # fail fast when the client is closed or forked
        with self._counting_waiter():
            local_wait = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._gate.acquire(True, local_wait):
                self._timeouts += 1
                return False
        try:
            entry = self._take(deadline)
        except BaseException:
            self._gate.release()
            raise
        if entry is None:
            self._timeouts += 1
            self._gate.release()
            return False
        thread = threading.current_thread()
        with self._mutex:
            self._hold = _Hold(entry, me, thread.name)
            self.lost.clear()
            self._acquisitions += 1
        self.client.add_listener(self._on_state)
        if entry.session_id != self.client.session_id:  # lost in the meantime
            self._mark_lost(self._hold)
        return True

    def release(self) -> None:
        """Release the lock (the node is deleted, in the background if the connection is down)."""
        with self._mutex:
            hold = self._hold
            if hold is None:
                raise RecipeUsageError(f"release of {self!r}, which is not held")
            if self._reentrant and hold.thread != threading.get_ident():
                raise RecipeUsageError(
                    f"{self!r} is held by thread {hold.thread_name!r}; only the holding thread "
                    f"may release a re-entrant {self._kind}"
                )
            hold.count -= 1
            if hold.count > 0:
                return
            self._hold = None
        self.client.remove_listener(self._on_state)
        try:
            # Our node's name is unique (protected uuid + sequence), so deleting it
            # can never touch another holder's node, even after LOST.
            self._queue.leave(hold.entry)
        finally:
            self._gate.release()

    def is_held(self) -> bool:
        """True while this process holds the lock for sure (not in doubt, not lost)."""
        hold = self._hold
        return hold is not None and not hold.lost and not self._in_doubt(hold)

    def _in_doubt(self, hold: _Hold) -> bool:
        return node_in_doubt(self.client, hold)

    def check(self) -> None:
        """Raise LockLost if the lock was lost; call it before writes in long critical sections."""
        hold = self._hold
        if hold is None:
            raise RecipeUsageError(f"{self!r} is not held")
        if hold.lost or hold.entry.session_id != self.client.session_id:
            raise LockLost(
                f"{self._kind} {self.path} was lost with its ZooKeeper session; another "
                "process may hold it now"
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

    def on_lost(self, callback: LostCallback) -> None:
        """Call ``callback(lock)`` (on a listener thread) when a held lock is lost."""
        self._on_lost.append(callback)

    def contenders(self) -> list[Contender]:
        """Every node queued on this path, holder first, with owner metadata."""
        names = self._queue.participants()
        pending = [self.client.get_async(self._queue.node_path(n)) for n in names]
        result: list[Contender] = []
        for index, (name, request) in enumerate(zip(names, pending, strict=True)):
            try:
                data, _ = request.result(self.client.settings.connection_timeout)
            except NoNodeError:
                continue
            result.append(Contender(self._queue.node_path(name), _parse_owner(data), index == 0))
        return result

    def statistics(self) -> LockStatistics:
        hold = self._hold
        return LockStatistics(
            path=self.path,
            held=self.is_held(),
            in_doubt=bool(hold and not hold.lost and self._in_doubt(hold)),
            lost=bool(hold and hold.lost),
            node=hold.entry.path if hold else None,
            fencing_token=hold.entry.czxid if hold else None,
            holder_thread=hold.thread_name if hold else None,
            depth=hold.count if hold else 0,
            acquisitions=self._acquisitions,
            timeouts=self._timeouts,
            losses=self._losses,
        )

    def __repr__(self) -> str:
        hold = self._hold
        if hold is None:
            state = "unlocked"
        elif hold.lost:
            state = "LOST"
        elif self._in_doubt(hold):
            state = "in doubt"
        else:
            state = f"held by {hold.thread_name!r} token={hold.entry.czxid}"
        if self._waiting:
            state += f" waiting={self._waiting}"
        return f"<{self._kind} {self.path} {state}>"

    # -- internals -------------------------------------------------------
    def _take(self, deadline: float | None) -> Entry | None:
        """Queue up and wait for our turn (a read lock taken by its writer overrides this)."""
        return self._queue.acquire(
            owner_data(self.identifier),
            deadline,
            self._rule(),
            head_shortcut=self._head_shortcut,
        )

    @contextlib.contextmanager
    def _counting_waiter(self) -> Iterator[None]:
        with self._mutex:
            self._waiting += 1
        try:
            yield
        finally:
            with self._mutex:
                self._waiting -= 1

    def _on_state(self, change: StateChange) -> None:
        hold = self._hold
        if hold is None or hold.lost:
            return
        if node_lost_by(self.client, hold, change):
            self._mark_lost(hold)

    def _mark_lost(self, hold: _Hold) -> None:
        with self._mutex:
            if hold.lost:
                return
            hold.lost = True
            hold.in_doubt = False
            self._losses += 1
        log.warning("%s %s LOST with session %#x", self._kind, self.path, hold.entry.session_id)
        self.lost.set()
        for callback in list(self._on_lost):
            try:
                callback(self)  # type: ignore[arg-type]
            except Exception:
                log.exception("error in an on_lost callback of %s", self.path)


class Lock(_Mutex):
    """A fair, fenced, loss-aware distributed lock (not re-entrant)."""

    _kind = "Lock"


class RLock(_Mutex):
    """Like Lock, but the holding thread may acquire it again (Curator's InterProcessMutex)."""

    _reentrant = True
    _kind = "RLock"
