"""The cache engine: one persistent watch, ordered pipelined reads, exact across reconnects.

NodeCache, ChildrenCache and TreeCache are faces of this one engine; they
choose the watch's mode, the depth and which events reach their listeners.

**One watch.** A persistent recursive watch on the root (a non-recursive one
for a single node), which needs no node: a root that does not exist yet is
waited for, and a root deleted and re-created is followed. The client puts
the watch back on every connection that comes up and then says so
(``on_established``); the engine then re-synchronises.

**Every change is a read, applied in the order it was sent.** A notification
only names a path (ZooKeeper 3.8 sends no zxid with it), so the engine reads
the node and applies what it read. All reads go out from the engine's own
thread, pipelined (at most ``MAX_IN_FLIGHT`` waiting), and are applied
strictly in the order they were sent. A session's requests are answered in
order, so a read sent later saw the server at the same moment or later: the
cache only moves forward, through states the server held. Per node:

- not cached -> CREATED;
- cached with another ``czxid`` -> the node was deleted and made again while
  we looked away: DELETED (with whatever was cached below it), then CREATED;
- a newer ``mzxid`` -> CHANGED, with what it is now (a value changed and
  changed back is reported once, as what it ended as); an older one is a
  stale read and is dropped; an equal one changes nothing (a newer stat, a
  child added, is kept silently);
- NoNode -> DELETED, with everything cached below it, deepest first.

**Re-synchronising** (the first load, after a new session, and after a
reconnect when the diff below cannot be had) walks the tree with the same
ordered reads: ``get`` of every node, and ``get_children`` only of a node
whose ``pzxid`` moved (its children changed) or that is new to the cache:
one read per cached node plus one per directory that changed, not Curator's
two. What the walk did not see, and no event touched meanwhile, is gone:
DELETED. Then INITIALIZED (the first time) or RESYNCED: the cache equals
what the server held at the moment of the last read.

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
one-shot watch there would replace the persistent one on 3.6-3.8) and the
paths whose event reads failed (``_dirty``). A node new to the cache is
walked in full; a cached child is not read again for a listing of its
parent (its own watch flags it). Nothing is inferred from silence: a node
the diff did not flag is one the server says did not change. The cost:
``requests`` on the RESYNCED event, about one read per change instead of
one per node; the server keeps the one-shot watches of the unchanged nodes
until each fires once or the connection ends.

**Listeners** run on the cache's own worker thread, in order, never on
kazoo's or the connection's threads: a slow listener delays this cache's
events and no other recipe. One that raises is logged and the others are
still called.

Size: over the house limit (tests/test_module_sizes.py): one worker and the
ordered pipeline it runs (events, walks full and incremental, applying reads)
share its in-flight queue and its walk; what is stored (store.py), the values and events
(values.py) and the three faces are modules of their own.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from zk_recipes import _paths
from zk_recipes._cache.store import CacheStore
from zk_recipes._cache.values import CachedNode, CacheEvent, CacheEventType
from zk_recipes._client.client import ZkClient
from zk_recipes._client.persistent import PersistentWatch
from zk_recipes._client.states import ConnectionState, StateChange
from zk_recipes._errors import (
    CacheOverflowError,
    ClientStateError,
    ConnectionLostError,
    NoNodeError,
    RecipeUsageError,
    SessionLost,
    UnsupportedFeatureError,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes._types import WatchEvent, WatchEventType, ZnodeStat, mark_inline

log = logging.getLogger("zk_recipes.cache")

#: Whether this process said once that a server has no persistent watches.
_FELL_BACK = False

#: Reads the engine keeps in flight before it waits for the oldest.
MAX_IN_FLIGHT = 256
#: A node, or a path that may become one, is looked at by a selector: False skips it
#: and everything below it.
Selector = Callable[[str], bool]
Listener = Callable[[CacheEvent], object]
T_co = TypeVar("T_co", covariant=True)


class _Reply(Protocol[T_co]):
    """A request in flight (the client's ``Pending``)."""

    def result(self, timeout: float | None = None) -> T_co: ...


class _Sink:
    """The watch's callback: on the connection thread, it only queues the path (mark_inline)."""

    def __init__(self, engine: CacheEngine) -> None:
        self._engine = engine

    def __call__(self, event: WatchEvent) -> None:
        path = event.path
        if path is None or event.type is WatchEventType.NONE:
            return  # a one-shot watch dropped with the connection: the next walk re-arms it
        if event.type is WatchEventType.CHILD:
            if self._engine.one_shot:  # a persistent watch's CHILD says nothing new
                self._engine._queue(("list", path))
            return
        self._engine._queue(("event", path))


mark_inline(_Sink)


@dataclasses.dataclass(slots=True)
class _Read:
    """A read in flight: ``get`` of ``path`` (and its children, when ``children`` is set)."""

    path: str
    #: None for a listing alone (a walk that found the node's children changed).
    data: _Reply[tuple[bytes, ZnodeStat]] | None
    #: Part of a walk (a re-synchronisation): descend below the node.
    walk: int
    children: _Reply[list[str]] | None = None
    #: For a listing alone: the node's ``pzxid`` as this walk's read of it saw it.
    pzxid: int = 0


class _ChildCatchUp:
    """The CHILD events of a catch-up (a directory whose children changed): a listing each."""

    def __init__(self, engine: CacheEngine) -> None:
        self._engine = engine

    def __call__(self, event: WatchEvent) -> None:
        if event.path is not None and event.type is WatchEventType.CHILD:
            self._engine._queue(("list", event.path))


mark_inline(_ChildCatchUp)


@dataclasses.dataclass(slots=True)
class _Walk:
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


class CacheEngine:
    """The state and the worker of one cache (the faces hold one and say what to show)."""

    def __init__(
        self,
        client: ZkClient,
        root: str,
        *,
        recursive: bool = True,
        max_depth: int | None = None,
        selector: Selector | None = None,
        cache_data: bool = True,
        max_nodes: int | None = None,
        name: str = "cache",
    ) -> None:
        self.client = client
        self.root = _paths.validate_path(root, what="the cache's root")
        self._recursive = recursive
        self._max_depth = max_depth
        self._selector = selector
        self._cache_data = cache_data
        self._name = name
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._work: collections.deque[tuple[Any, ...]] = collections.deque()
        self.store = CacheStore(self.root, name, max_nodes)
        self._listeners: list[Listener] = []
        self._watch: PersistentWatch | None = None
        self._thread: threading.Thread | None = None
        self._running = False
        self._closed = False
        self._walks = 0
        self._walk: _Walk | None = None
        #: A walk's reads waiting to be sent: (path, walk, data, children, pzxid). Sent as
        #: the in-flight ones are applied, so no more than MAX_IN_FLIGHT wait at once (a
        #: server throttles a connection with too many requests outstanding).
        self._todo: collections.deque[tuple[str, int, bool, bool, int]] = collections.deque()
        self._sink = _Sink(self)
        #: True on a server without persistent watches: one-shot watches on every node.
        self.one_shot = False
        self._child_catch_up = _ChildCatchUp(self)
        #: The connection as of whose end the cache holds every change (a walk ended
        #: on it), for the next reconnect's diff; None: walk in full.
        self._exact_generation: int | None = None
        #: Paths whose event read failed (the connection went): the next resync reads them.
        self._dirty: set[str] = set()
        #: While a catch-up is under way, the events it brings (see _queue).
        self._collect: list[tuple[Any, ...]] | None = None
        #: False once a server refused setWatches2: every resync walks in full.
        self._diff_works = True
        self.initialized = threading.Event()
        #: Set while the cache equals the server as of its last read; cleared on SUSPENDED.
        self.synced = threading.Event()

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            if self._running or self._closed:
                raise RecipeUsageError(
                    f"{self._name} on {self.root} was started already"
                    + (" and closed: make a new one" if self._closed else "")
                )
            self._running = True
        self.client.check_usable()
        self._thread = threading.Thread(
            target=self._run, name=f"zk-recipes {self._name} {self.root}", daemon=True
        )
        self._thread.start()
        self.client.add_listener(self._on_state)
        try:
            self._watch = self.client.add_watch(
                self.root,
                self._sink,
                recursive=self._recursive,
                on_established=lambda watch: self._queue(("resync", watch.generation)),
            )
        except UnsupportedFeatureError as exc:
            self._fall_back(exc)
        except BaseException:
            self.close()
            raise

    def _fall_back(self, why: UnsupportedFeatureError) -> None:
        """No persistent watches on this server: one-shot watches on every node, same events."""
        global _FELL_BACK
        self.one_shot = True
        if not _FELL_BACK:
            _FELL_BACK = True
            log.warning(
                "%s on %s: the server has no persistent watches (%s); caches use one-shot "
                "watches instead (two per node, and every node re-read after a reconnect)",
                self._name,
                self.root,
                why,
            )
        self._queue(("resync",))

    def close(self) -> None:
        """Stop: the watch is removed, the worker ends, listeners hear nothing more. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._running = False
            self._work.append(("stop",))
            self._wake.notify_all()
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.remove()
        self.client.remove_listener(self._on_state)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)

    @property
    def closed(self) -> bool:
        return self._closed

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for each event from now on; returns a function that stops it."""
        if not callable(listener):
            raise RecipeUsageError(f"a cache listener must be callable, got {listener!r}")
        with self._lock:
            self._listeners = [*self._listeners, listener]

        def stop() -> None:
            with self._lock:
                self._listeners = [x for x in self._listeners if x is not listener]

        return stop

    # -- the snapshot (store.py) -------------------------------------------
    def current(self) -> Mapping[str, CachedNode]:
        """Every cached node by path: a snapshot, consistent, not changed by later events."""
        return self.store.current()

    def get(self, path: str) -> CachedNode | None:
        return self.store.get(path)

    def children(self, path: str) -> list[str]:
        """The names of ``path``'s cached children, sorted (from the index: O(children))."""
        return self.store.children(path)

    def size(self) -> int:
        return self.store.size()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until the cache equals the server (INITIALIZED or RESYNCED since the last cut)."""
        return self.synced.wait(timeout)

    # -- what is in scope --------------------------------------------------
    def _depth(self, path: str) -> int | None:
        """How far below the root ``path`` is (0: the root), None if not under it."""
        root = self.root
        if path == root:
            return 0
        prefix = root if root == "/" else root + "/"
        if not path.startswith(prefix):
            return None
        return path[len(prefix) :].count("/") + 1

    def _in_scope(self, path: str) -> bool:
        depth = self._depth(path)
        if depth is None or (self._max_depth is not None and depth > self._max_depth):
            return False
        selector = self._selector
        if selector is None:
            return True
        # The node and each ancestor below the root must be selected.
        candidate = path
        while True:
            if not selector(candidate):
                return False
            if candidate == self.root:
                return True
            candidate = _paths.parent_of(candidate)

    # -- the worker --------------------------------------------------------
    def _queue(self, item: tuple[Any, ...]) -> None:
        with self._lock:
            if self._closed:
                return
            if self._collect is not None and item[0] in ("event", "list"):
                self._collect.append(item)  # a catch-up's: its walk reads them
                return
            self._work.append(item)
            self._wake.notify()

    def _on_state(self, change: StateChange) -> None:
        self._queue(("state", change))
        if self.one_shot and change.state.is_connected:  # READ_ONLY too
            self._queue(("resync",))  # kazoo dropped every one-shot watch with the connection

    def _run(self) -> None:
        in_flight: collections.deque[_Read | tuple[Any, ...]] = collections.deque()
        while True:
            with self._lock:
                while not self._work and not in_flight and not self._todo and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                items: list[tuple[Any, ...]] = []
                while self._work and len(in_flight) + len(items) < MAX_IN_FLIGHT:
                    items.append(self._work.popleft())
            try:
                for item in items:
                    self._start(item, in_flight)
                self._send_todo(in_flight)
                if in_flight:
                    self._finish(in_flight.popleft(), in_flight)
            except CacheOverflowError as exc:
                self._fail(exc)
                return
            except Exception:
                log.exception("%s on %s: the worker failed; the cache stops", self._name, self.root)
                self._fail(ZkRecipesError(f"{self._name} on {self.root} failed; see the log"))
                return

    def _start(self, item: tuple[Any, ...], in_flight: collections.deque[Any]) -> None:
        kind = item[0]
        if kind == "event":
            path = item[1]
            if self._in_scope(path):
                # One-shot mode: a node new to the cache needs its child watch too.
                listing = self.one_shot and self.store.get(path) is None and self._descends(path)
                read = self._read(path, walk=0, children=listing)
                if read is not None:
                    in_flight.append(read)
                else:
                    self._dirty.add(path)
        elif kind == "resync":
            self._walks += 1
            generation = item[1] if len(item) > 1 else None
            walk = _Walk(self._walks, not self.initialized.is_set(), generation)
            walk.dirty = frozenset(self._dirty)
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
        elif kind == "list":
            path = item[1]
            if self._in_scope(path) and self._descends(path):
                read = self._read(path, walk=0, data=False, children=True)
                if read is not None:
                    in_flight.append(read)
        elif kind == "state":
            in_flight.append(item)  # told in order with the node events around it

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

    def _catch_up(self, walk: _Walk, since: int) -> bool:
        """An incremental resync: the server flags what changed since ``since``; read that.

        False when the server refused the diff (walk in full instead).
        """
        walk.incremental = True
        data = [path for path in self.store.paths() if path != self.root]
        child = [path for path in data if self._descends(path)]
        with self._lock:
            self._collect = []
        failure: ZkRecipesError | None = None
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
            # The connection went: the next one's resync asks again, from the same zxid.
            log.debug("%s on %s: the diff failed: %s", self._name, self.root, failure)
            self._dirty |= flagged
            walk.failed = True
            return True
        walk.requests += sent
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

    def _read(
        self, path: str, *, walk: int, children: bool = False, data: bool = True
    ) -> _Read | None:
        watch = self._sink if self.one_shot else None
        try:
            got = None
            if data:
                got = self.client.get_async(path, watch=watch)
            listing = None
            if children:
                listing = self.client.get_children_async(path, watch=watch)
        except (ClientStateError, ConnectionLostError, SessionLost, ZkTimeoutError):
            return None  # the next connection's re-synchronisation reads it
        return _Read(path, got, walk, listing)

    def _result(self, pending: _Reply[Any]) -> Any:
        return pending.result(self.client.settings.connection_timeout)

    def _finish(self, item: _Read | tuple[Any, ...], in_flight: collections.deque[Any]) -> None:
        if isinstance(item, tuple):
            change: StateChange = item[1]
            if change.state is ConnectionState.SUSPENDED or change.state.ends_session:
                self.synced.clear()
            self._emit([CacheEvent(CacheEventType.CONNECTION, state=change)])
            return
        current = self._walk
        walk = current if item.walk and current and item.walk == current.number else None
        try:
            got = self._result(item.data) if item.data is not None else None
            names = self._result(item.children) if item.children is not None else None
        except NoNodeError:
            self._apply_gone(item.path)
            if self.one_shot and item.path == self.root:
                self._await_root()
            self._walk_step_done(walk)
            return
        except ZkRecipesError as exc:
            log.debug("%s on %s: reading %s: %s", self._name, self.root, item.path, exc)
            if walk is not None:
                walk.failed = True  # the next connection's walk does it again
            elif item.data is not None:
                self._dirty.add(item.path)  # and reads this again
            self._walk_step_done(walk)
            return
        if got is None:  # a listing alone: in a walk, or a one-shot CHILD event
            if walk is not None and names is not None:
                if item.pzxid:  # a catch-up's listing knows no pzxid: the next walk lists it
                    walk.listed[item.path] = item.pzxid
                self._prune_children(item.path, set(names))
                self._read_children(item.path, names, walk)
            elif names is not None:
                self._new_children(item.path, names, in_flight)
            self._walk_step_done(walk)
            return
        data, stat = got
        before = self._apply(item.path, data, stat)  # marks it seen by the walk under way
        if walk is not None:
            self._descend(item.path, stat, before, names, walk)
        elif names is not None:
            self._new_children(item.path, names, in_flight)
        self._walk_step_done(walk)

    def _new_children(self, path: str, names: list[str], in_flight: collections.deque[Any]) -> None:
        """One-shot mode, outside a walk: a listing of ``path``; read the children it adds."""
        self._prune_children(path, set(names))
        for name in names:
            child = _paths.join(path, name)
            if self.store.get(child) is None and self._in_scope(child):
                read = self._read(child, walk=0, children=self._descends(child))
                if read is not None:
                    in_flight.append(read)

    def _await_root(self) -> None:
        """One-shot mode: the root does not exist; an exists watch tells when it comes."""
        try:
            made = self.client.exists_async(self.root, watch=self._sink).result(
                self.client.settings.connection_timeout
            )
        except ZkRecipesError:
            return  # the next connection's walk tries again
        if made is not None:
            self._queue(("event", self.root))

    def _descends(self, path: str) -> bool:
        """Whether the cache holds children of ``path`` (recursive, above max_depth)."""
        if not self._recursive:
            return False
        depth = self._depth(path)
        return self._max_depth is None or depth is None or depth < self._max_depth

    def _walk_step_done(self, walk: _Walk | None) -> None:
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
        walk: _Walk,
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

    def _read_children(self, path: str, names: list[str], walk: _Walk) -> None:
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
        walk: _Walk,
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

    def _end_walk(self, walk: _Walk) -> None:
        self._walk = None
        if walk.failed:
            return  # the connection went: the next one walks again
        events: list[CacheEvent] = []
        if not walk.incremental:  # a diff flags what went; a full walk infers it
            gone = [p for p in self.store.paths() if p not in walk.seen]
            for path in sorted(gone, key=lambda p: -p.count("/")):
                events.extend(self.store.remove(path))
        self.store.note_listed(walk.listed)
        self._dirty -= walk.dirty
        self._exact_generation = walk.generation
        kind = CacheEventType.INITIALIZED if walk.first else CacheEventType.RESYNCED
        events.append(CacheEvent(kind, requests=walk.requests, incremental=walk.incremental))
        self._emit(events)
        self.initialized.set()
        self.synced.set()

    # -- applying what was read ---------------------------------------------
    def _apply(self, path: str, data: bytes, stat: ZnodeStat) -> CachedNode | None:
        """Apply one read of ``path``; returns the node cached before it."""
        old = self.store.get(path)
        if self._walk is not None:
            self._walk.seen.add(path)  # touched while a walk runs: not "unseen"
        node = CachedNode(path, data if self._cache_data else None, stat)
        if old is None:
            self.store.put(node)
            self._emit([CacheEvent(CacheEventType.CREATED, node=node)])
        elif old.stat.czxid != stat.czxid:
            events = self.store.remove(path)
            self.store.put(node)
            events.append(CacheEvent(CacheEventType.CREATED, node=node))
            self._emit(events)
        elif stat.mzxid > old.stat.mzxid:
            self.store.put(node)
            self._emit([CacheEvent(CacheEventType.CHANGED, node=node, old=old)])
        elif stat.mzxid == old.stat.mzxid and stat.pzxid > old.stat.pzxid:
            self.store.put(dataclasses.replace(old, stat=stat))  # children moved: no event
        return old

    def _apply_gone(self, path: str) -> None:
        if self._walk is not None:
            self._walk.seen.add(path)
        self._emit(self.store.remove(path))

    def _prune_children(self, path: str, listed: set[str]) -> None:
        """A listing of ``path``: cached children it no longer has are gone."""
        cached = set(self.store.children(path))
        events: list[CacheEvent] = []
        for name in sorted(cached - listed):
            events.extend(self.store.remove(_paths.join(path, name)))
        self._emit(events)

    # -- telling -----------------------------------------------------------
    def _emit(self, events: list[CacheEvent]) -> None:
        """Tell the listeners, on the engine's own thread, in order.

        The thread is this cache's: a slow listener holds up this cache's
        events (and its reads, which wait to be applied) and nothing else. A
        hop to yet another thread would cost every event a wake-up.
        """
        listeners = self._listeners
        for event in events:
            for listener in listeners:
                try:
                    listener(event)
                except Exception:
                    log.exception(
                        "%s on %s: a listener raised on %s", self._name, self.root, event.type
                    )

    def _fail(self, failure: ZkRecipesError) -> None:
        self.store.failure = failure
        log.error("%s", failure)
        self.close()
