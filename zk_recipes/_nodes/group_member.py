"""GroupMember: a member node of ours plus the live membership of the group.

**GroupMember** (Curator's GroupMember): an ephemeral, unprotected
PersistentNode at ``<group>/<id>`` plus a view of the group — the children of
``<group>`` and their data — kept current by a children watch and one data
watch per member, all re-armed after NONE and on every reconnect. The view
sits behind the small ``_Membership`` protocol so the ChildrenCache recipe can
replace it later. Like Curator, ``members()`` always includes this member.

Znodes (Curator's layout): ``<group>/<id>``, EPHEMERAL, data the member's
payload, under CONTAINER parents (the server reaps an empty group).

SUSPENDED: nothing changes. The view keeps what it last read (it may be
stale while the connection is down) and our node stays, since the session
normally lives on; both are checked again on reconnect. LOST: the server
(or the client, declaring it first) ended our session, so our ephemeral node
is gone and the others see us leave; the PersistentNode re-creates it under
the new session (a stale copy of an old session of ours is replaced at
once), and the view re-lists the whole group and re-arms every watch. A
member that crashes leaves when the server expires its session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import logging
import threading
import types
from collections.abc import Callable, Mapping
from typing import Protocol, final

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import StateChange
from zk_recipes._errors import ConfigurationError, NoNodeError
from zk_recipes._internals.args import require_callable, require_client
from zk_recipes._internals.reconciler import Reconciler
from zk_recipes._nodes.persistent_node import (
    PersistentNode,
    PersistentNodeEvent,
    PersistentNodeState,
)
from zk_recipes._threads import SerialExecutor
from zk_recipes._types import WatchEvent

log = logging.getLogger("zk_recipes.group")


@dataclasses.dataclass(frozen=True)
class MembershipChange:
    """What a GroupMember listener receives when the group changed."""

    #: Every member now (id → data), as ``members()`` returns it.
    members: Mapping[str, bytes]
    joined: frozenset[str]
    left: frozenset[str]
    #: Members whose data changed.
    updated: frozenset[str]


MembershipListener = Callable[[MembershipChange], object]
#: ``hook(old, new)``: the view's members before and after a change.
_ChangeHook = Callable[[dict[str, bytes], dict[str, bytes]], None]


class _Membership(Protocol):
    """What GroupMember needs from its view of the group (the ChildrenCache recipe, later)."""

    def start(self) -> None: ...
    def close(self) -> None: ...
    def snapshot(self) -> dict[str, bytes]: ...


class _ChildrenView:
    """The children of one path and their data, kept current with one-shot watches."""

    def __init__(self, client: ZkClient, path: str, on_change: _ChangeHook) -> None:
        self._client = client
        self._path = path
        self._on_change = on_change
        self._lock = threading.Lock()
        self._members: dict[str, bytes] = {}
        self._relist = True
        #: child → token of its pending data watch (absent: re-read it).
        self._watches: dict[str, int] = {}
        self._tokens = itertools.count(1)
        self._closed = False
        self._worker = Reconciler(client, f"zk-recipes group view {path}", self._refresh, _noop)

    def start(self) -> None:
        self._client.add_listener(self._on_state)
        self._worker.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._client.remove_listener(self._on_state)
        self._worker.stop()

    def snapshot(self) -> dict[str, bytes]:
        with self._lock:
            return dict(self._members)

    def _on_state(self, change: StateChange) -> None:
        if change.state.is_connected:
            with self._lock:
                self._relist = True
                self._watches.clear()  # kazoo keeps no watch across a disconnect
            self._worker.wake()

    def _on_children(self, _event: WatchEvent) -> None:
        with self._lock:
            self._relist = True
        self._worker.wake()

    def _on_data(self, name: str, token: int, _event: WatchEvent) -> None:
        with self._lock:
            if self._watches.get(name) == token:
                del self._watches[name]
        self._worker.wake()

    def _refresh(self) -> None:
        with self._lock:
            if self._closed:
                return
            relist, self._relist = self._relist, False
            names = None if relist else sorted(self._members)
        try:
            if names is None:
                names = sorted(self._list())
                with self._lock:
                    for gone in self._watches.keys() - set(names):
                        del self._watches[gone]
            self._read(names)
        except BaseException:
            with self._lock:
                self._relist = True
            raise

    def _list(self) -> list[str]:
        for _ in range(5):
            try:
                return self._client.get_children(self._path, watch=self._on_children)
            except NoNodeError:
                pass
            # No group node (yet): watch for its creation.
            if self._client.exists(self._path, watch=self._on_children) is None:
                return []
        return []

    def _read(self, names: list[str]) -> None:
        with self._lock:
            todo = [n for n in names if n not in self._watches or n not in self._members]
            tokens = {n: next(self._tokens) for n in todo}
            self._watches.update(tokens)
        try:
            pending = {
                n: self._client.get_async(
                    _paths.join(self._path, n), watch=functools.partial(self._on_data, n, t)
                )
                for n, t in tokens.items()
            }
            timeout = self._client.settings.connection_timeout
            read: dict[str, bytes] = {}
            for name, request in pending.items():
                with contextlib.suppress(NoNodeError):
                    read[name] = request.result(timeout)[0]
        except BaseException:
            with self._lock:
                for name, token in tokens.items():
                    if self._watches.get(name) == token:
                        del self._watches[name]
            raise
        with self._lock:
            if self._closed:
                return
            old = self._members
            new: dict[str, bytes] = {}
            for name in names:
                if name in read:
                    new[name] = read[name]
                elif name in tokens:  # NoNode: gone, and no watch was set
                    if self._watches.get(name) == tokens[name]:
                        del self._watches[name]
                elif name in old:
                    new[name] = old[name]
            self._members = new
        if new != old:
            self._on_change(old, new)


def _noop() -> None:
    pass


@final
class GroupMember:
    """Membership in a group: our own ephemeral node plus a live view of everyone's.

    ``GroupMember(client, "/groups/workers", "worker-7", b"10.0.0.7")``: while
    started, our member node ``<group>/<id>`` stays there (an ephemeral
    PersistentNode) and ``members()`` is everyone's id -> data, kept current by
    watches; listeners hear every change. Curator GroupMembers on the same
    path see us and we see them. See docs/recipes/group-member.md.
    """

    def __init__(
        self, client: ZkClient, group_path: str, member_id: str, data: bytes = b""
    ) -> None:
        self.client = require_client(client, "GroupMember")
        self.group_path = _paths.validate_writable_path(group_path, what="group_path")
        if not isinstance(member_id, str) or not member_id or "/" in member_id:
            raise ConfigurationError(
                f"member_id must be a non-empty str without '/', like 'worker-7'; got {member_id!r}"
            )
        self.id = member_id
        self._node = PersistentNode(client, _paths.join(group_path, member_id), data)
        self._view: _Membership = _ChildrenView(client, self.group_path, self._view_changed)
        self._lock = threading.Lock()
        self._listeners: list[MembershipListener] = []
        self._events = SerialExecutor(f"zk-recipes group member {self._node.path} listeners")

    @staticmethod
    def id_from_path(path: str) -> str:
        """The member id of a member node's path (its last segment), as Curator's idFromPath."""
        return _paths.name_of(path)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Join the group (in the background) and start following its membership."""
        self._node.start()
        self._view.start()

    def close(self) -> None:
        """Leave the group: our node is deleted and the view stops. Idempotent."""
        self._node.close()
        self._view.close()

    def __enter__(self) -> GroupMember:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def wait_for_initial_create(self, timeout: float | None = None) -> bool:
        """Block until our member node was created once; False on timeout."""
        return self._node.wait_for_initial_create(timeout)

    # ------------------------------------------------------------------ membership
    @property
    def path(self) -> str:
        """Our member node: ``<group_path>/<id>``."""
        return self._node.path

    @property
    def state(self) -> PersistentNodeState:
        """The state of our member node (CONFLICT: another live session uses our id)."""
        return self._node.state

    @property
    def data(self) -> bytes:
        return self._node.data

    def set_data(self, data: bytes) -> None:
        """Change our member data (written in the background, like PersistentNode.set_data)."""
        self._node.set_data(data)

    def members(self) -> dict[str, bytes]:
        """Every member now, id → data. Includes this member while started, as Curator does."""
        return self._with_self(self._view.snapshot())

    def add_listener(self, listener: MembershipListener) -> None:
        """Call ``listener(MembershipChange)`` when the group changes, on a thread of ours."""
        require_callable(listener, "a listener")
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: MembershipListener) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def __repr__(self) -> str:
        return f"<GroupMember {self.id!r} of {self.group_path} {self._node.state.name}>"

    def _with_self(self, members: dict[str, bytes]) -> dict[str, bytes]:
        if self._node.state not in (PersistentNodeState.LATENT, PersistentNodeState.CLOSED):
            members.setdefault(self.id, self._node.data)
        return members

    def _view_changed(self, old: dict[str, bytes], new: dict[str, bytes]) -> None:
        change = MembershipChange(
            members=types.MappingProxyType(self._with_self(dict(new))),
            joined=frozenset(new.keys() - old.keys()),
            left=frozenset(old.keys() - new.keys()),
            updated=frozenset(k for k in new.keys() & old.keys() if new[k] != old[k]),
        )
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            self._events.submit(functools.partial(listener, change))


__all__ = [
    "GroupMember",
    "MembershipChange",
    "PersistentNode",
    "PersistentNodeEvent",
    "PersistentNodeState",
]
