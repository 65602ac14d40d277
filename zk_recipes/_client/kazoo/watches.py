"""Persistent watches on the wire: ``addWatch`` and ``removeWatches``, and their routing.

kazoo 2.11 has none of them. The records follow zookeeper.jute exactly:

- ``addWatch`` (opcode 106): ``AddWatchRequest { ustring path; int mode }``,
  mode PERSISTENT = 0 or PERSISTENT_RECURSIVE = 1, answered by an
  ``ErrorResponse { int err }``. No existence check: a watch may wait on a
  path that does not exist yet.
- ``removeWatches`` (18): ``{ ustring path; int type }`` with the
  ``WatcherType`` CHILDREN = 1, DATA = 2, ANY = 3, and, from ZooKeeper 3.9
  only, PERSISTENT = 4 and PERSISTENT_RECURSIVE = 5 (a 3.6-3.8 server answers
  those with MarshallingError; there ANY is the only way to remove a
  persistent watch, and it takes the path's one-shot watches too). No reply
  body; NOWATCHER (-121) when nothing matched. (``checkWatches``, 17, has the
  same body; nothing here needs it, so it is not sent.)
- ``setWatches2`` (105): ``SetWatches2 { long relativeZxid; vector<ustring>
  dataWatches, existWatches, childWatches, persistentWatches,
  persistentRecursiveWatches }``, no reply body. The server answers each
  one-shot watch with a catch-up event when the node changed after
  ``relativeZxid`` (data: NodeDeleted or NodeDataChanged by ``mzxid``; child:
  NodeDeleted or NodeChildrenChanged by ``pzxid``), and only otherwise keeps
  the watch, all before its reply and with no write in between. Sent with an
  ordinary xid (the Java client's -8 only marks it in its logs), so the
  reply says the catch-up is over. A cache uses it as the server's diff
  after a reconnect (``zk_recipes._cache.engine``).

The server sends one notification per connection per change, however many
of the connection's watches it matches; the client fans it out
(``PersistentRouter.route``):

- CREATED, CHANGED, DELETED of a path go to its PERSISTENT watchers and to
  the PERSISTENT_RECURSIVE watchers of the path and of every ancestor, ``/``
  included (kazoo's open PR #715 never produces ``/`` as an ancestor);
- CHILD (NodeChildrenChanged) goes to PERSISTENT watchers of the path only,
  never to recursive ones (the server sends it for a PERSISTENT watch, which
  it keeps among the child watches too, or for a one-shot child watch on the
  same connection; the Java client filters it only from 3.9 on).

**One server watch per path, in the strongest mode needed.** ZooKeeper
3.6-3.8 keep one mode per (connection, path) among their data watches
(ZOOKEEPER-4466, fixed in 3.9): a PERSISTENT ``addWatch`` after a
PERSISTENT_RECURSIVE one on the same path makes it non-recursive, and every
change below the path goes unheard. So a path with any recursive watcher is
only ever sent PERSISTENT_RECURSIVE (``adding``), and its PERSISTENT
watchers are served from it here: their CREATED, CHANGED and DELETED come
with it, and their CHILD is made from the CREATED and DELETED of the path's
direct children (``made_child``), in the server's own order (a child's
event, then its parent's CHILD). The server keeps a PERSISTENT ``addWatch``
among its child watches too, and sends the path's real CHILD events from
that entry; on 3.6-3.8 a later recursive ``addWatch`` of the path replaces
the entry's mode with its own, which sends no CHILD. So the router holds
the entry as taken from the reply of a PERSISTENT ``addWatch`` on the
connection up now until a recursive one's reply (or a removal's): exact
watchers get the real CHILD events while it holds, made ones otherwise,
never both (on 3.9, where the entry outlives the recursive ``addWatch``,
the real ones are then dropped, the made ones told). When a path's last
recursive watcher goes and exact ones stay, PERSISTENT is sent again
(``release``): it narrows the server's watch and brings the entry back.

A persistent watcher is never popped by an event, unlike kazoo's one-shot
ones. The router is per connection; the client's registry
(``zk_recipes._client.persistent``) puts its watches back on every new
connection.
"""

from __future__ import annotations

import threading
from collections import namedtuple
from collections.abc import Callable, Iterator
from typing import Any

from kazoo.protocol.serialization import int_struct, long_struct, write_string

from zk_recipes import _paths

#: ``AddWatchModes`` (ZooDefs.java).
PERSISTENT = 0
PERSISTENT_RECURSIVE = 1
#: The ``WatcherType`` values sent (Watcher.java).
CHILDREN = 1
DATA = 2
ANY = 3

#: Event types on the wire (``WatcherEvent.type``): NodeCreated, NodeDeleted,
#: NodeDataChanged, NodeChildrenChanged.
NODE_EVENTS = frozenset({1, 2, 3})
CHILD_EVENT = 4

#: A persistent watcher: called with kazoo's event (type, path) on kazoo's worker.
Fire = Callable[[Any], None]


class AddWatch(namedtuple("AddWatch", "path mode then", defaults=(None,))):
    """addWatch (opcode 106); the reply is an ErrorResponse, its err 0 when it worked.

    ``then()``, if given, runs when the server took it, on kazoo's connection
    thread (as ``ForgetDataWatch``'s): in order with the events read.
    """

    type = 106

    def serialize(self) -> bytearray:
        body = bytearray()
        body.extend(write_string(self.path))
        body.extend(int_struct.pack(self.mode))
        return body

    def deserialize(self, buffer: bytes, offset: int) -> None:
        # An ErrorResponse; an error came in the reply header already (and then
        # kazoo does not call this).
        if self.then is not None:
            self.then()


class RemoveWatches(namedtuple("RemoveWatches", "path watcher_type then", defaults=(None,))):
    """removeWatches (opcode 18): no reply body; ``then()`` as ``AddWatch``'s."""

    type = 18

    def serialize(self) -> bytearray:
        body = bytearray()
        body.extend(write_string(self.path))
        body.extend(int_struct.pack(self.watcher_type))
        return body

    def deserialize(self, buffer: bytes, offset: int) -> None:
        if self.then is not None:
            self.then()


class ForgetDataWatch(namedtuple("ForgetDataWatch", "path watcher_type then")):
    """removeWatches (18) of a one-shot data watch; ``then()`` runs when the server did it.

    ``then`` runs inside kazoo's reading of the reply, on its connection
    thread: serialized with every watch event and every watcher kazoo
    registers, so it may change kazoo's watcher tables safely.
    """

    type = 18
    serialize = RemoveWatches.serialize

    def deserialize(self, buffer: bytes, offset: int) -> None:
        self.then()


class SetWatches2(namedtuple("SetWatches2", "relative_zxid data exist child")):
    """setWatches2 (opcode 105) with one-shot watches only: no reply body."""

    type = 105

    def serialize(self) -> bytearray:
        body = bytearray(long_struct.pack(self.relative_zxid))
        # persistentWatches and persistentRecursiveWatches go empty: the registry
        # puts those back with addWatch, which says when each is on the server.
        for paths in (self.data, self.exist, self.child, (), ()):
            body.extend(int_struct.pack(len(paths)))
            for path in paths:
                body.extend(write_string(path))
        return body

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> None:
        return None


def set_watches_batches(
    relative_zxid: int, data: list[str], child: list[str], limit: int
) -> list[SetWatches2]:
    """The one-shot watches in requests of at most ``limit`` bytes of paths each."""
    batches: list[SetWatches2] = []
    batch: tuple[list[str], list[str]] = ([], [])
    size = 0
    for kind, paths in ((0, data), (1, child)):
        for path in paths:
            cost = 4 + len(path.encode())
            if size + cost > limit and (batch[0] or batch[1]):
                batches.append(SetWatches2(relative_zxid, batch[0], [], batch[1]))
                batch, size = ([], []), 0
            batch[kind].append(path)
            size += cost
    if batch[0] or batch[1]:
        batches.append(SetWatches2(relative_zxid, batch[0], [], batch[1]))
    return batches


def ancestors(path: str) -> Iterator[str]:
    """``path`` itself, then each parent up to ``/`` (``/a/b`` -> ``/a/b``, ``/a``, ``/``)."""
    yield path
    while path != "/":
        path = _paths.parent_of(path)
        yield path


class PersistentRouter:
    """Which persistent watchers of one connection an incoming event goes to.

    Written by callers' threads, read by kazoo's connection thread: every
    change replaces the mapping it touches (copy on write), so ``route``
    reads without a lock. ``generation`` says which connection is up (the
    hooks set it): what the server holds is known per connection.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exact: dict[str, frozenset[Fire]] = {}
        self._recursive: dict[str, frozenset[Fire]] = {}
        #: While a setWatches2 catch-up is under way: who hears every CHILD event.
        self._catch_up: frozenset[Fire] = frozenset()
        #: Paths whose PERSISTENT addWatch the server took, by the connection it was
        #: taken on: there it sends the path's CHILD events (the module note).
        self._child_entries: dict[str, int] = {}
        #: The connection up now (``KazooConnection.generation``), read on kazoo's thread.
        self.generation: Callable[[], int] = lambda: 0

    def add(self, path: str, fire: Fire, recursive: bool) -> None:
        with self._lock:
            table = dict(self._recursive if recursive else self._exact)
            table[path] = table.get(path, frozenset()) | {fire}
            if recursive:
                self._recursive = table
            else:
                self._exact = table

    def remove(self, path: str, fire: Fire, recursive: bool) -> bool:
        """Forget ``fire``; True when no watcher of that mode is left on ``path``."""
        with self._lock:
            table = dict(self._recursive if recursive else self._exact)
            left = table.get(path, frozenset()) - {fire}
            if left:
                table[path] = left
            else:
                table.pop(path, None)
            if recursive:
                self._recursive = table
            else:
                self._exact = table
            return not left

    def hear_children(self, fire: Fire, on: bool) -> None:
        """Route every CHILD event to ``fire`` too (``on``), or stop: a catch-up's window."""
        with self._lock:
            self._catch_up = self._catch_up | {fire} if on else self._catch_up - {fire}

    @property
    def empty(self) -> bool:
        """No persistent watcher at all: an event needs no look here (the usual case)."""
        return not self._exact and not self._recursive and not self._catch_up

    def watches(self, path: str) -> bool:
        """Whether any persistent watcher of either mode is on exactly ``path``."""
        return path in self._exact or path in self._recursive

    def paths(self) -> tuple[list[str], list[str]]:
        """(PERSISTENT paths, PERSISTENT_RECURSIVE paths) watched now."""
        return list(self._exact), list(self._recursive)

    # -- what the server is sent (the module note) ------------------------
    def adding(self, path: str, recursive: bool) -> AddWatch:
        """The ``addWatch`` for a watcher of ``path``: recursive if any watcher there is."""
        if recursive or path in self._recursive:
            return AddWatch(path, PERSISTENT_RECURSIVE, lambda: self._child_entries.pop(path, None))
        return AddWatch(path, PERSISTENT, lambda: self._took_child_entry(path))

    def release(self, path: str) -> AddWatch | RemoveWatches | None:
        """What to send once a mode's last watcher of ``path`` left.

        Nothing while a recursive watcher stays (the server's watch serves
        them all); a PERSISTENT ``addWatch`` when only exact ones stay (the
        recursive one is no longer needed, and the child entry comes back);
        ``removeWatches`` of type ANY when none stays (the caller checks that
        no one-shot watch shares the path).
        """
        if path in self._recursive:
            return None
        if path in self._exact:
            return self.adding(path, False)
        return RemoveWatches(path, ANY, lambda: self._child_entries.pop(path, None))

    def _took_child_entry(self, path: str) -> None:
        # On kazoo's thread, as the reply is read: in order with the events around it.
        self._child_entries[path] = self.generation()

    def _child_entry(self, path: str) -> bool:
        return self._child_entries.get(path) == self.generation()

    # -- what the server sent ----------------------------------------------
    def route(self, event_type: int, path: str) -> list[Fire]:
        """The watchers an event of wire type ``event_type`` on ``path`` goes to."""
        if event_type == CHILD_EVENT:
            # From our PERSISTENT watch's child entry, or else from a one-shot child
            # watch (kazoo's, a catch-up's): exact watchers hear the CHILD events of
            # one source only (made_child makes theirs when the entry is not there).
            exact = self._exact.get(path, ()) if self._child_entry(path) else ()
            return [*exact, *self._catch_up]
        if event_type not in NODE_EVENTS:
            return []
        found: list[Fire] = list(self._exact.get(path, ()))
        recursive = self._recursive
        if not recursive:
            return found
        if len(recursive) > _FEW_ROOTS:
            for candidate in ancestors(path):
                found.extend(recursive.get(candidate, ()))
            return found
        # A few watched roots (the usual case: a cache or two): test each as a prefix
        # rather than build every ancestor of the path; deepest first, as above.
        under = [root for root in recursive if _is_under(path, root)]
        if len(under) > 1:
            under.sort(key=len, reverse=True)
        for root in under:
            found.extend(recursive[root])
        return found

    def made_child(self, event_type: int, path: str) -> tuple[str, list[Fire]] | None:
        """The CHILD of ``path``'s parent its exact watchers get from this event, if any.

        A CREATED or DELETED of a direct child reaches us through a recursive
        watch; when the parent has exact watchers and the server holds no
        child entry of ours there, it sends them no CHILD: it is made here.
        """
        if event_type not in _CHILDREN_CHANGE or path == "/" or not self._exact:
            return None
        parent = _paths.parent_of(path)
        fires = self._exact.get(parent)
        if not fires or self._child_entry(parent):
            return None
        return parent, list(fires)


#: Up to this many recursive roots, ``route`` tests each root instead of each ancestor.
_FEW_ROOTS = 8


def _is_under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it (``/a/b`` is under ``/a`` and ``/``)."""
    if not path.startswith(root):
        return False
    return len(path) == len(root) or root == "/" or path[len(root)] == "/"


#: Wire events that change the parent's children: NodeCreated, NodeDeleted.
_CHILDREN_CHANGE = frozenset({1, 2})
