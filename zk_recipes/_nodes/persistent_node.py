"""PersistentNode: a node that keeps itself there.

Design notes.

**PersistentNode** (Curator's PersistentNode). ``start()`` hands all the work
to a worker thread of the node's own, which runs one *reconcile* step each
time something may have changed and otherwise sleeps on an event (no
polling). A step creates the node if it is missing (CONTAINER parents,
protected if asked), arms an ``exists`` watch on it, and writes data given to
``set_data``. What wakes it: the watch (DELETED → re-create, CHANGED → re-arm,
NONE — kazoo dropped the watch on a disconnect → re-check), the client's
states (CONNECTED/RECONNECTED → re-check and re-arm, LOST → an ephemeral node
is gone: re-create), ``set_data`` and ``close``. A step that fails with a
connection error is tried again after a capped back-off while connected, and
at the next RECONNECTED otherwise. The thread ends on ``close()`` and when the
client is closed.

Re-creating keeps the name. Once the first create told us the node's actual
name, later creates use that literal path with the non-sequential mode. That
is Curator's rule (base path + the last 10 characters, i.e. the sequence
suffix, under the same protected prefix) written as the path it produces, so
a protected or sequential node keeps one name for its whole life.

Whose node is it? For an ephemeral node, ``ephemeralOwner`` decides: our
live session → ours (adopt it, write our data); one of this client's
earlier sessions that the server has not expired yet → a stale copy,
replaced (``create(replace_stale=True)``); any other live session → CONFLICT:
not taken over. Curator adopts it instead, so two processes silently share
one node and the first to leave deletes it for both. We log a warning, tell
the listeners, and keep an exists watch on that node: when it goes, ours is
created. A *persistent* node (no owner) where an ephemeral one should be is
a CONFLICT too, with an error in the log that says so: adopting it would
make it outlive this process, and deleting it could destroy someone's data
(the event's ``owner`` is 0). For a persistent, TTL or container
PersistentNode there is no owner to check: an existing node is adopted and
given our data, as in Curator.

Znodes: the node itself — ``path``, or ``<parent>/_c_<uuid>-<name>`` when
protected, plus a ``%010d`` suffix in sequential modes — with CONTAINER
parents. SUSPENDED: nothing is done; the session normally lives on, and with
it the node. LOST: an ephemeral node is gone with the session; it is created
again as soon as a new session is up.


Size: over the house limit (tests/test_module_sizes.py): one class and its
reconcile state machine (Curator's PersistentNode.java is of the same size);
the retry-until-right loop is the shared Reconciler's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import logging
import threading
from collections.abc import Callable
from typing import final

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.creates import CreateResult
from zk_recipes._client.states import ConnectionState, StateChange
from zk_recipes._errors import (
    ClientStateError,
    ConfigurationError,
    HolderSessionLost,
    NodeExistsError,
    NoNodeError,
    RecipeUsageError,
)
from zk_recipes._internals.args import require_callable, require_client
from zk_recipes._internals.reconciler import Reconciler
from zk_recipes._threads import SerialExecutor
from zk_recipes._types import CreateMode, WatchEvent, WatchEventType, ZnodeStat

log = logging.getLogger("zk_recipes.nodes")

#: The mode a sequential node is re-created with (at its known name).
_RECREATE_MODE = {
    CreateMode.EPHEMERAL_SEQUENTIAL: CreateMode.EPHEMERAL,
    CreateMode.PERSISTENT_SEQUENTIAL: CreateMode.PERSISTENT,
    CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL: CreateMode.PERSISTENT_WITH_TTL,
}


class PersistentNodeState(enum.Enum):
    """Where a ``PersistentNode`` stands (its ``state``)."""

    LATENT = "LATENT"
    """Not started yet."""
    PENDING = "PENDING"
    """Started; the node is being created, or re-created after it went."""
    CREATED = "CREATED"
    """Our node exists (as of the last event from ZooKeeper)."""
    CONFLICT = "CONFLICT"
    """Another live session owns a node at our path; ours follows when it goes."""
    CLOSED = "CLOSED"


@dataclasses.dataclass(frozen=True)
class PersistentNodeEvent:
    """What a PersistentNode listener receives: the node was created, or is in conflict."""

    #: CREATED or CONFLICT.
    state: PersistentNodeState
    #: The node's path (relative to the client's namespace).
    path: str
    #: The node's ``ephemeralOwner``: our session once CREATED, the other one on
    #: CONFLICT; 0 for persistent, TTL and container nodes.
    owner: int


NodeListener = Callable[[PersistentNodeEvent], object]


@final
class PersistentNode:
    """A node that stays: re-created after it is deleted, after expiry, after reconnects.

    ``PersistentNode(client, "/services/api/host-1", b"10.0.0.7:8080")`` is an
    ephemeral node while started; ``close()`` deletes it.

    Parameters:
        client: a started ZkClient.
        path: where the node lives; parents are CONTAINER nodes.
        data: its data (``set_data`` changes it later, also on re-creates).
        mode: EPHEMERAL (the default) or any CreateMode; SEQUENTIAL modes keep
            the name the first create gave.
        protected: Curator's protected name (``_c_<uuid>-<name>``). None (the
            default): protected in the SEQUENTIAL modes, where only a protected
            name finds the node again after a lost reply, and not otherwise;
            ``protected=False`` with a SEQUENTIAL mode is refused (a lost reply
            could leave a second node of ours behind).
        ttl: seconds, for the TTL modes only.

    ``state`` says PENDING, CREATED or CONFLICT (someone else's node is where
    ours should be: not taken over); listeners hear CREATED and CONFLICT. See
    docs/recipes/persistent-node.md.
    """

    def __init__(
        self,
        client: ZkClient,
        path: str,
        data: bytes = b"",
        *,
        mode: CreateMode = CreateMode.EPHEMERAL,
        protected: bool | None = None,
        ttl: float | None = None,
    ) -> None:
        self.client = require_client(client, "PersistentNode")
        self.path = _paths.validate_writable_path(path)
        self.mode = CreateMode.checked(mode)
        self.ttl = self.mode.check_ttl(ttl)
        if protected is False and self.mode.is_sequential:
            raise ConfigurationError(
                f"a {self.mode.name} PersistentNode must be protected: after a lost reply "
                "only a protected name finds the node again, and an unprotected one could "
                "leave a second node of ours. Leave protected= out (or pass True)"
            )
        self.protected = self.mode.is_sequential if protected is None else bool(protected)
        self._data = self._validate(data)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._state = PersistentNodeState.LATENT
        self._actual: str | None = None
        self._conflict_owner = 0
        #: The node we made or adopted: its owner session (0: not ephemeral) and czxid.
        self._node: tuple[int, int] = (0, 0)
        self._armed = False  # an exists watch is pending on the node
        self._created_once = False
        self._running = False
        self._data_gen = 0
        self._written_gen = 0
        self._listeners: list[NodeListener] = []
        self._events = SerialExecutor(f"zk-recipes persistent node {path} listeners")
        self._worker = Reconciler(
            client, f"zk-recipes persistent node {path}", self._reconcile, self._worker_ended
        )

    def _validate(self, data: object) -> bytes:
        return _paths.validate_data(data, path=self.path, limit=self.client.settings.max_data_bytes)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Create the node in the background and keep it there until ``close()``."""
        with self._lock:
            if self._state is PersistentNodeState.CLOSED:
                raise RecipeUsageError(f"{self!r} is closed; create a new one to start again")
            if self._state is not PersistentNodeState.LATENT:
                raise RecipeUsageError(f"{self!r} is already started; start() it once")
            if not self.client.is_started:
                self.client.check_usable()  # says "closed: create a new one" or "not started"
                raise ClientStateError(f"start the ZkClient before {self!r}")
            self._state = PersistentNodeState.PENDING
            self._running = True
        self.client.add_listener(self._on_state)
        self._worker.start()

    def close(self) -> None:
        """Stop re-creating and delete the node (guaranteed delete). Idempotent."""
        with self._lock:
            previous = self._state
            if previous is PersistentNodeState.CLOSED:
                return
            self._state = PersistentNodeState.CLOSED
            ours = self._actual if previous is PersistentNodeState.CREATED else None
            self._changed.notify_all()
        if previous is PersistentNodeState.LATENT:
            return
        self.client.remove_listener(self._on_state)
        self._worker.stop()
        if ours is not None:
            self._delete(ours)

    def __enter__(self) -> PersistentNode:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def wait_for_initial_create(self, timeout: float | None = None) -> bool:
        """Block until the node was created once; False on timeout, close or client close."""
        with self._lock:
            if self._state is PersistentNodeState.LATENT:
                raise RecipeUsageError(f"{self!r} is not started; call start() first")
            self._changed.wait_for(
                lambda: (
                    self._created_once
                    or not self._running
                    or self._state is PersistentNodeState.CLOSED
                ),
                timeout,
            )
            return self._created_once

    # ------------------------------------------------------------------ introspection
    @property
    def state(self) -> PersistentNodeState:
        return self._state

    @property
    def actual_path(self) -> str | None:
        """The node's path as created (protected/sequential name); None before the first create."""
        return self._actual

    @property
    def data(self) -> bytes:
        """The data the node has, or is given when it is next written or re-created."""
        return self._data

    def set_data(self, data: bytes) -> None:
        """Use ``data`` from now on: written to the node in the background, and on re-creates.

        Returns at once, like Curator's ``setData``; the node has the new data
        within one round trip while connected.
        """
        data = self._validate(data)
        with self._lock:
            if self._state is PersistentNodeState.CLOSED:
                raise RecipeUsageError(f"{self!r} is closed")
            self._data = data
            self._data_gen += 1
        self._worker.wake()

    def add_listener(self, listener: NodeListener) -> None:
        """Call ``listener(PersistentNodeEvent)`` on each create and conflict (on our thread)."""
        require_callable(listener, "a listener")
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: NodeListener) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def __repr__(self) -> str:
        where = self._actual or self.path
        return f"<PersistentNode {where} {self.mode.name} {self._state.name}>"

    # ------------------------------------------------------------------ events
    def _on_state(self, change: StateChange) -> None:
        if change.state is ConnectionState.LOST:
            with self._lock:
                self._armed = False
                if self.mode.is_ephemeral and self._state is PersistentNodeState.CREATED:
                    self._state = PersistentNodeState.PENDING
        elif change.state.is_connected:
            with self._lock:
                self._armed = False  # kazoo keeps no watch across a disconnect
        else:
            return
        self._worker.wake()

    def _on_watch(self, event: WatchEvent) -> None:
        # kazoo's callback thread: note and hand over.
        with self._lock:
            self._armed = False
            if event.type is WatchEventType.DELETED and self._state is PersistentNodeState.CREATED:
                self._state = PersistentNodeState.PENDING
        self._worker.wake()

    def _worker_ended(self) -> None:
        with self._lock:
            self._running = False
            self._changed.notify_all()

    def _emit(self, event: PersistentNodeEvent) -> None:
        # Called with self._lock held; submit() never blocks.
        for listener in self._listeners:
            self._events.submit(functools.partial(listener, event))

    # ------------------------------------------------------------------ the worker's step
    def _reconcile(self) -> None:
        with self._lock:
            if self._state is PersistentNodeState.CLOSED:
                return
            settled = self._armed and self._state in (
                PersistentNodeState.CREATED,
                PersistentNodeState.CONFLICT,
            )
        if not settled:
            self._ensure()
        self._write_data()

    def _ensure(self) -> None:
        actual = self._actual
        if actual is not None:
            stat = self._watch(actual)
            if stat is not None and self._is_ours(stat):
                self._adopt(actual, stat, write=False)
                return
        with self._lock:
            data, generation = self._data, self._data_gen
        try:
            created = self._create(actual, data)
        except NodeExistsError:
            path = actual or self.path  # only a fixed name can exist already
            stat = self._watch(path)
            if stat is None:
                self._worker.wake()  # gone in between: go round again
            elif self._is_ours(stat):
                if self.mode.is_ephemeral:
                    # Ours already (an earlier node's delete still pending): keep it.
                    self.client.cancel_pending_delete(path)
                self._adopt(path, stat, write=True)
            else:
                self._conflict(path, stat.ephemeral_owner)
            return
        if not self._record(created, generation):
            return
        stat = self._watch(created.path)
        if stat is None or not self._is_ours(stat):
            with self._lock:
                if self._state is PersistentNodeState.CREATED:
                    self._state = PersistentNodeState.PENDING
            self._worker.wake()

    def _create(self, actual: str | None, data: bytes) -> CreateResult:
        if actual is None:
            path, mode, protected = self.path, self.mode, self.protected
        else:
            path, mode, protected = actual, _RECREATE_MODE.get(self.mode, self.mode), False
        return self.client.create(
            path,
            data,
            mode=mode,
            ttl=self.ttl,
            parents=True,
            protected=protected,
            replace_stale=mode is CreateMode.EPHEMERAL,
        )

    def _watch(self, path: str) -> ZnodeStat | None:
        # Marked before sending: an event can only come after the reply.
        with self._lock:
            self._armed = True
        try:
            return self.client.exists(path, watch=self._on_watch)
        except BaseException:
            with self._lock:
                self._armed = False
            raise

    def _is_ours(self, stat: ZnodeStat) -> bool:
        if not self.mode.is_ephemeral:
            return True
        return self.client.session_epoch(stat.ephemeral_owner) is not None

    def _record(self, created: CreateResult, generation: int) -> bool:
        """Note a node we just created; False (and delete it) if we were closed meanwhile."""
        with self._lock:
            closed = self._state is PersistentNodeState.CLOSED
            if not closed:
                self._actual = created.path
                self._node = (created.stat.ephemeral_owner, created.stat.czxid)
                self._written_gen = generation
                self._enter_created(created.path, created.stat.ephemeral_owner)
        if closed:
            self._node = (created.stat.ephemeral_owner, created.stat.czxid)
            self._delete(created.path)
        return not closed

    def _adopt(self, path: str, stat: ZnodeStat, *, write: bool) -> None:
        with self._lock:
            if self._state is PersistentNodeState.CLOSED:
                return
            self._actual = path
            self._node = (stat.ephemeral_owner, stat.czxid)
            if write:
                self._written_gen = -1  # Curator's setData after NodeExists
            if self._state is not PersistentNodeState.CREATED:
                self._enter_created(path, stat.ephemeral_owner)

    def _enter_created(self, path: str, owner: int) -> None:
        # Called with self._lock held.
        if self._state is PersistentNodeState.CONFLICT:
            log.info("%s: the conflicting node is gone; ours is created", path)
        self._state = PersistentNodeState.CREATED
        self._created_once = True
        self._changed.notify_all()
        self._emit(PersistentNodeEvent(PersistentNodeState.CREATED, path, owner))

    def _conflict(self, path: str, owner: int) -> None:
        with self._lock:
            if self._state is PersistentNodeState.CLOSED:
                return
            new = self._state is not PersistentNodeState.CONFLICT or self._conflict_owner != owner
            self._state = PersistentNodeState.CONFLICT
            self._conflict_owner = owner
            if new:
                self._emit(PersistentNodeEvent(PersistentNodeState.CONFLICT, path, owner))
        if not new:
            return
        if owner == 0:
            # A persistent (or container/TTL) node where ours should be ephemeral:
            # adopting it would make it outlive this process, deleting it could
            # destroy someone's data. Neither: say so, and wait for it to go.
            log.error(
                "%s already exists as a PERSISTENT node (no owner session): an EPHEMERAL "
                "PersistentNode neither adopts it (it would outlive this process) nor deletes "
                "it (it may be someone's data). Delete that node, or choose another path; "
                "ours is created as soon as it is gone",
                path,
            )
        else:
            log.warning(
                "%s already exists and belongs to session %#x, not to this client (session "
                "%#x): not taking it over; ours will be created when that node goes",
                path,
                owner,
                self.client.session_id,
            )

    def _write_data(self) -> None:
        with self._lock:
            if self._state is not PersistentNodeState.CREATED or self._actual is None:
                return
            if self._written_gen == self._data_gen:
                return
            path, data, generation = self._actual, self._data, self._data_gen
            holder = self._node[0] or None  # an ephemeral node: written on its session only
        try:
            self.client.set(path, data, session=holder)
        except (NoNodeError, HolderSessionLost):
            with self._lock:
                self._armed = False
                if self._state is PersistentNodeState.CREATED:
                    self._state = PersistentNodeState.PENDING
            self._worker.wake()
            return
        with self._lock:
            self._written_gen = generation

    def _delete(self, path: str) -> None:
        client = self.client
        owner, czxid = self._node
        try:
            if owner:
                # As the holder only: after its session, the path may be someone else's node.
                client.delete(path, guaranteed=True, session=owner, czxid=czxid)
            else:
                client.delete(path, guaranteed=True)
        except ClientStateError:
            if not self.mode.is_ephemeral:
                log.warning("the client was closed before %s could be deleted", path)
        except Exception:
            log.warning("could not delete %s", path, exc_info=True)


# ---------------------------------------------------------------------- GroupMember
