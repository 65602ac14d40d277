"""A cache's re-synchronisations: the full walk, and the server's diff after a reconnect.

**The full walk** (the first load, after a new session, and after a
reconnect when the diff below cannot be had) reads the tree with the
engine's ordered reads: ``get`` of every node, and ``get_children`` only of a
node whose ``pzxid`` moved (its children changed) or that is new to the
cache: one read per cached node plus one per directory that changed, not
Curator's two. What the walk did not see, and no event touched meanwhile, is
gone: DELETED. Then INITIALIZED (the first time) or RESYNCED: the cache
equals what the server held at the moment of the last read.

**The server's diff after a reconnect** (the same session resumed on a new
connection). The server keeps no watch across connections and puts a
persistent watch back with no word of what changed meanwhile; but it does
answer one-shot watches sent with ``setWatches2`` against a zxid: each node
that changed after it gets a catch-up event, the others a watch. So, once
the persistent watch is back, the engine sends every cached path as a data
watch and every directory as a child watch, relative to the zxid this
client had seen when the connection it was exact on ended
(``ZkClient.resumed_since``): the Java client's own rule for its watches.
Every change after that zxid is either flagged (its ``mzxid``, or its
parent's ``pzxid``, is newer) or happened after the persistent watch was
back and arrives as an event; what was flagged is read, with the root (a
one-shot watch there would replace the persistent one on 3.6-3.8), the
paths whose event reads failed (``_dirty``) and the nodes it may not read
(``unreadable``). A node new to the cache is walked in full; a cached child
is not read again for a listing of its parent (its own watch flags it).
Nothing is inferred from silence: a node the diff did not flag is one the
server says did not change. The cost: ``requests`` on the RESYNCED event,
about one read per change instead of one per node. The one-shot watches of
the unchanged nodes stay on the server until each fires once, the
connection ends, or the cache is closed (``close()`` takes them back).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from typing import TYPE_CHECKING, Any

from zk_recipes import _paths
from zk_recipes._cache.reads import Backoff, ChildCatchUp, Read
from zk_recipes._cache.scope import Scope
from zk_recipes._cache.store import CacheStore
from zk_recipes._cache.values import CachedNode, CacheEvent, CacheEventType
from zk_recipes._client.client import ZkClient
from zk_recipes._errors import UnsupportedFeatureError, ZkRecipesError
from zk_recipes._types import ZnodeStat

log = logging.getLogger("zk_recipes.cache")

#: Reads the engine keeps in flight before it waits for the oldest.
MAX_IN_FLIGHT = 256


@dataclasses.dataclass(slots=True)
class Walk:
    """A re-synchronisation under way."""

    number: int
    first: bool
    #: The connection the watch was on when it began (None: not known, one-shot mode).
    generation: int | None = None
    #: Reads only what the server's diff flagged (the module note).
    incremental: bool = False
    #: The paths whose event reads had failed when it began: read again.
    dirty: frozenset[str] = frozenset()
    #: Requests it sent (reads, and the setWatches2 batches).
    requests: int = 0
    seen: set[str] = dataclasses.field(default_factory=set)
    #: Directories this walk listed, with the ``pzxid`` they had no later than that.
    listed: dict[str, int] = dataclasses.field(default_factory=dict)
    outstanding: int = 0
    failed: bool = False


@dataclasses.dataclass(slots=True)
class Leftover:
    """The one-shot watches a catch-up left on the server, on one connection."""

    generation: int
    data: set[str]
    child: set[str]


class Walks(Scope):
    """The engine's re-synchronisations (a part of ``CacheEngine``, kept here for its size)."""

    # Provided by CacheEngine.
    client: ZkClient
    store: CacheStore
    one_shot: bool
    initialized: threading.Event
    synced: threading.Event
    _name: str
    _lock: threading.Lock
    _walks: int
    _walk: Walk | None
    _todo: collections.deque[tuple[str, int, bool, bool, int]]
    _exact_generation: int | None
    _dirty: set[str]
    _collect: list[tuple[Any, ...]] | None
    _diff_works: bool
    _child_catch_up: ChildCatchUp
    _unreadable: set[str]
    _leftover: Leftover | None
    _backoff: Backoff

    if TYPE_CHECKING:

        def _read(
            self, path: str, *, walk: int, children: bool = False, data: bool = True
        ) -> Read | None: ...

        def _prune_children(self, path: str, listed: set[str]) -> None: ...

        def _emit(self, events: list[CacheEvent]) -> None: ...

        def _live(self, generation: int) -> bool: ...

        def _retry_later(self, key: str, kind: str, item: tuple[Any, ...]) -> None: ...

    def _resync(self, generation: int | None, in_flight: collections.deque[Any]) -> None:
        """Begin a re-synchronisation: the server's diff when it can be had, else a full walk."""
        self._walks += 1
        walk = Walk(self._walks, not self.initialized.is_set(), generation)
        walk.dirty = frozenset(self._dirty | self._unreadable)
        self._walk = walk
        since = self._diff_since(generation)
        if since is not None and self._catch_up(walk, since):
            return
        self._exact_generation = None
        read = self._read(self.root, walk=walk.number, children=self._recursive)
        if read is None:
            walk.failed = True
        else:
            walk.outstanding += 1
            walk.requests += 1 + int(self._recursive)
            in_flight.append(read)

    def _diff_since(self, generation: int | None) -> int | None:
        """The zxid a diff of this resync would be relative to; None: walk in full."""
        exact = self._exact_generation
        if (
            generation is None
            or exact is None
            or exact >= generation
            or self.one_shot
            or not self._recursive
            or not self._diff_works
        ):
            return None
        return self.client.resumed_since(exact)

    def _catch_up(self, walk: Walk, since: int) -> bool:
        """An incremental resync: the server flags what changed since ``since``; read that.

        False when the server refused the diff (walk in full instead).
        """
        walk.incremental = True
        data = [path for path in self.store.paths() if path != self.root]
        child = [path for path in data if self._descends(path)]
        with self._lock:
            self._collect = []
        failure: ZkRecipesError | None = None
        on = self.client.connection_generation
        try:
            sent, left_out = self.client.changed_since(since, data, child, self._child_catch_up)
        except ZkRecipesError as exc:
            failure = exc
        finally:
            with self._lock:
                collected, self._collect = self._collect or [], None
        flagged = {path for kind, path in collected if kind == "event"}
        if isinstance(failure, UnsupportedFeatureError):
            self._diff_works = False
            log.info(
                "%s on %s: no diff from the server (%s); resyncs walk in full",
                self._name,
                self.root,
                failure,
            )
            return False
        if failure is not None:
            log.debug("%s on %s: the diff failed: %s", self._name, self.root, failure)
            self._dirty |= flagged
            walk.failed = True
            if self._live(on):  # a slow reply, not a lost connection: ask again soon
                self._retry_later(self.root, "resync", ("resync", walk.generation))
            return True  # else the next connection's resync asks again, from the same zxid
        walk.requests += sent
        skipped = set(left_out)
        if self.client.connection_generation == on:
            self._leftover = Leftover(
                on,
                {p for p in data if p not in skipped and p not in flagged},
                {p for p in child if p not in skipped},
            )
        listings = {path for kind, path in collected if kind == "list"}
        whole = [self.root, *(p for p in left_out if self._in_scope(p))]
        for path in whole:
            self._walk_read(path, walk, children=self._descends(path))
        for path in sorted((flagged | walk.dirty) - set(whole)):
            if self._in_scope(path):
                self._walk_read(path, walk)
        for path in sorted(listings - set(whole)):
            if self._in_scope(path) and self._descends(path):
                self._walk_read(path, walk, data=False, children=True)
        return True

    def _walk_step_done(self, walk: Walk | None) -> None:
        if walk is None:
            return
        walk.outstanding -= 1
        if walk.outstanding == 0 and self._walk is walk:
            self._end_walk(walk)

    def _descend(
        self,
        path: str,
        stat: ZnodeStat,
        before: CachedNode | None,
        names: list[str] | None,
        walk: Walk,
    ) -> None:
        """During a walk: read the children of ``path``, listing them only when they changed."""
        if not self._descends(path):
            return
        unchanged = before is not None and before.stat.czxid == stat.czxid
        if walk.incremental and names is None and unchanged:
            return  # not new: the diff flagged its children if they changed
        if names is None:
            # The children cached are complete only as of the last walk that listed
            # them: an event read lost in a cut leaves a gap that no pzxid shows.
            known = self.store.listed_at(path) == stat.pzxid
            if not known:
                if stat.num_children > 0:
                    self._walk_read(path, walk, data=False, children=True, pzxid=stat.pzxid)
                else:
                    walk.listed[path] = stat.pzxid
                    self._prune_children(path, set())
                return
            names = self.store.children(path)
        else:
            walk.listed[path] = stat.pzxid
            self._prune_children(path, set(names))
        self._read_children(path, names, walk)

    def _read_children(self, path: str, names: list[str], walk: Walk) -> None:
        for name in names:
            child = _paths.join(path, name)
            if walk.incremental and self.store.get(child) is not None:
                continue  # cached: the diff flagged it if it changed
            if self._in_scope(child):
                # One-shot mode lists every node, with a watch, in the same round trip.
                listing = self.one_shot and self._descends(child)
                self._walk_read(child, walk, children=listing)

    def _walk_read(
        self,
        path: str,
        walk: Walk,
        *,
        data: bool = True,
        children: bool = False,
        pzxid: int = 0,
    ) -> None:
        """Queue a read for ``walk``; ``_send_todo`` sends it when there is room."""
        walk.outstanding += 1
        self._todo.append((path, walk.number, data, children, pzxid))

    def _send_todo(self, in_flight: collections.deque[Any]) -> None:
        walk = self._walk
        while self._todo and len(in_flight) < MAX_IN_FLIGHT:
            path, number, data, children, pzxid = self._todo.popleft()
            if walk is None or number != walk.number:
                continue  # a walk given up for a newer one
            read = self._read(path, walk=number, children=children, data=data)
            if read is None:
                walk.failed = True
                self._walk_step_done(walk)
                continue
            read.pzxid = pzxid
            walk.requests += data + children
            in_flight.append(read)

    def _end_walk(self, walk: Walk) -> None:
        self._walk = None
        if walk.failed:
            return  # the connection went: the next one walks again
        events: list[CacheEvent] = []
        if not walk.incremental:  # a diff flags what went; a full walk infers it
            gone = [p for p in self.store.paths() if p not in walk.seen]
            for path in sorted(gone, key=lambda p: -p.count("/")):
                events.extend(self.store.remove(path))
            self._unreadable &= walk.seen
        self.store.note_listed(walk.listed)
        self._dirty -= walk.dirty
        self._exact_generation = walk.generation
        kind = CacheEventType.INITIALIZED if walk.first else CacheEventType.RESYNCED
        events.append(CacheEvent(kind, requests=walk.requests, incremental=walk.incremental))
        self._emit(events)
        self.initialized.set()
        self.synced.set()
