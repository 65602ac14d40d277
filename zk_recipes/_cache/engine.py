"""The cache engine: one persistent watch, ordered pipelined reads, exact across reconnects.

NodeCache, ChildrenCache and TreeCache are faces of this one engine; they
choose the watch's mode, the depth and which events reach their listeners.

**One watch.** A persistent recursive watch on the root (a non-recursive one
for a single node), which needs no node: a root that does not exist yet is
waited for, and a root deleted and re-created is followed. The client puts
the watch back on every connection that comes up and then says so
(``on_established``); the engine then re-synchronises (``walks.py``: a full
walk, or the server's diff of what changed while away). Caches of either
mode on one path of one client share one server watch
(``zk_recipes._client.kazoo.watches``).

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
- NoNode -> DELETED, with everything cached below it, deepest first;
- a DELETED notification is final, and needs no read: it is stamped with
  the zxid of the newest reply read before it (the server answers what it
  handled before the delete ahead of the notification) and applied in the
  pipeline's order to a cached node made no later than that (a node made
  later is a new one of the same name, found by a read sent after the
  delete). Creates and data changes cost one read each, deletes none;
- NoAuth, and other failed reads: ``reads.py`` (an unreadable node is
  skipped and reported, never a cache that does not initialize; a read
  error on a live connection is read again, not left for a reconnect).

**Listeners** run on the cache's own worker thread, in order, never on
kazoo's or the connection's threads: a slow listener delays this cache's
events and no other recipe. One that raises is logged and the others are
still called. A cache that stops (``max_nodes`` passed) tells them FAILED
and ends every wait with the error.

Size: over the house limit (tests/test_module_sizes.py): one worker and the
ordered pipeline it runs (its queue, applying reads, the faces' reads) share
its in-flight queue; the walks (walks.py), the reads (reads.py), what is
stored (store.py), its scope (scope.py), the values and events (values.py)
and the three faces are modules of their own.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from zk_recipes import _paths
from zk_recipes._cache.reads import Backoff, ChildCatchUp, Closing, Read, Replies, Reply, Sink
from zk_recipes._cache.store import CacheStore
from zk_recipes._cache.values import CachedNode, CacheEvent, CacheEventType
from zk_recipes._cache.walks import MAX_IN_FLIGHT, Leftover, Walk, Walks
from zk_recipes._client.client import ZkClient
from zk_recipes._client.persistent import PersistentWatch
from zk_recipes._client.states import ConnectionState, StateChange
from zk_recipes._deadline import session_clock
from zk_recipes._errors import (
    CacheOverflowError,
    ClientStateError,
    ConnectionLostError,
    NoAuthError,
    NoNodeError,
    RecipeUsageError,
    SessionLost,
    UnsupportedFeatureError,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes._internals.args import require_client
from zk_recipes._types import ZnodeStat

log = logging.getLogger("zk_recipes.cache")

#: Whether this process said once that a server has no persistent watches.
_FELL_BACK = False

#: A node, or a path that may become one, is looked at by a selector: False skips it
#: and everything below it.
Selector = Callable[[str], bool]
Listener = Callable[[CacheEvent], object]


class CacheEngine(Walks):
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
        self.client = require_client(client, name)
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
        self._started = False
        self._running = False
        self._closed = False
        self._walks = 0
        self._walk: Walk | None = None
        #: A walk's reads waiting to be sent: (path, walk, data, children, pzxid). Sent as
        #: the in-flight ones are applied, so no more than MAX_IN_FLIGHT wait at once (a
        #: server throttles a connection with too many requests outstanding).
        self._todo: collections.deque[tuple[str, int, bool, bool, int]] = collections.deque()
        self._sink = Sink(self)
        #: True on a server without persistent watches: one-shot watches on every node.
        self.one_shot = False
        self._child_catch_up = ChildCatchUp(self)
        #: The connection as of whose end the cache holds every change (a walk ended
        #: on it), for the next reconnect's diff; None: walk in full.
        self._exact_generation: int | None = None
        #: Paths whose event read failed (the connection went): the next resync reads them.
        self._dirty: set[str] = set()
        #: While a catch-up is under way, the events it brings (see _queue).
        self._collect: list[tuple[Any, ...]] | None = None
        #: False once a server refused setWatches2: every resync walks in full.
        self._diff_works = True
        #: Nodes this client may not read (NoAuth): skipped with what is below them.
        self._unreadable: set[str] = set()
        #: The one-shot watches the last catch-up left (close() takes them back).
        self._leftover: Leftover | None = None
        self._backoff = Backoff()
        self._replies = Replies()
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
            self._running = self._started = True
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
        """Stop: the watch is removed, the worker ends, listeners hear nothing more. Idempotent.

        Returns at once while disconnected (nothing waits for the server).
        The one-shot watches the last incremental resync left on unchanged
        nodes are taken back (``removeWatches``, not waited for) where no
        other watcher of the client is on the node. What stays: with a
        server without persistent watches, the one-shot watches set on every
        node (until each node changes or the connection ends).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._running = False
            self._work.append(("stop",))
            self._wake.notify_all()
        self._replies.interrupt()
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.remove()
        self.client.remove_listener(self._on_state)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)
        left, self._leftover = self._leftover, None
        if left is not None and self._live(left.generation):
            self.client.forget_changed_since(sorted(left.data), sorted(left.child))

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
    def _check_started(self) -> None:
        if not self._started:
            raise RecipeUsageError(
                f"{self._name} on {self.root} is not started: call start() first (or use it "
                "in a with block), then wait_initialized() for the first load"
            )

    def current(self) -> Mapping[str, CachedNode]:
        """Every cached node by path: a snapshot, consistent, not changed by later events."""
        self._check_started()
        return self.store.current()

    def get(self, path: str) -> CachedNode | None:
        self._check_started()
        return self.store.get(path)

    def children(self, path: str) -> list[str]:
        """The names of ``path``'s cached children, sorted (from the index: O(children))."""
        self._check_started()
        return self.store.children(path)

    def size(self) -> int:
        return self.store.size()

    @property
    def unreadable(self) -> frozenset[str]:
        return frozenset(self._unreadable)

    def wait_initialized(self, timeout: float | None = None) -> bool:
        self._check_started()
        return self._waited(self.initialized.wait(timeout))

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until the cache equals the server (INITIALIZED or RESYNCED since the last cut)."""
        self._check_started()
        return self._waited(self.synced.wait(timeout))

    def _waited(self, done: bool) -> bool:
        failure = self.store.failure
        if failure is not None:
            raise failure
        return done

    def _live(self, generation: int) -> bool:
        """Whether connection ``generation`` is the client's, and up."""
        state = self.client.state
        return (
            state is not None
            and state.is_connected
            and self.client.connection_generation == generation
        )

    # -- the worker --------------------------------------------------------
    def _queue(self, item: tuple[Any, ...]) -> None:
        with self._lock:
            if self._closed:
                return
            if self._collect is not None and item[0] in ("event", "list", "gone"):
                # A catch-up's: its walk reads them (a DELETED too: read, it says NoNode).
                self._collect.append(item if item[0] != "gone" else ("event", item[1]))
                return
            self._work.append(item)
            self._wake.notify()

    def _on_state(self, change: StateChange) -> None:
        self._queue(("state", change))
        if self.one_shot and change.state.is_connected:  # READ_ONLY too
            self._queue(("resync",))  # kazoo dropped every one-shot watch with the connection

    def _retry_later(self, key: str, kind: str, item: tuple[Any, ...]) -> None:
        """Send a read again after its back-off (``reads.py``); on the worker."""
        tries = self._backoff.later(session_clock(), key, kind, item)
        if tries == 1:
            log.warning("%s on %s: reading %s failed; reading it again", self._name, self.root, key)

    def _run(self) -> None:
        in_flight: collections.deque[Read | tuple[Any, ...]] = collections.deque()
        while True:
            with self._lock:
                while True:
                    if self._closed:
                        return
                    if self._backoff.waiting:
                        for kind, item in self._backoff.due(session_clock()):
                            (self._todo if kind == "todo" else self._work).append(item)
                    if self._work or in_flight or self._todo:
                        break
                    self._wake.wait(self._backoff.wait(session_clock()))
                items: list[tuple[Any, ...]] = []
                while self._work and len(in_flight) + len(items) < MAX_IN_FLIGHT:
                    items.append(self._work.popleft())
            try:
                for item in items:
                    self._start(item, in_flight)
                self._send_todo(in_flight)
                if in_flight:
                    self._finish(in_flight.popleft(), in_flight)
            except Closing:
                return
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
            if self._leftover is not None:
                self._leftover.data.discard(path)  # an event fired its one-shot watch, if any
            if self._in_scope(path):
                # A node new to the cache needs its children too: in one-shot mode (its
                # child watch), or readable again after a NoAuth (what is below it).
                listing = (
                    (self.one_shot or path in self._unreadable)
                    and self.store.get(path) is None
                    and self._descends(path)
                )
                read = self._read(path, walk=0, children=listing)
                if read is not None:
                    in_flight.append(read)
                else:
                    self._dirty.add(path)
        elif kind == "gone":
            path = item[1]
            if self._leftover is not None:
                self._leftover.data.discard(path)
            if self._in_scope(path) or path in self._unreadable:
                in_flight.append(item)  # applied in order with the reads sent before it
        elif kind == "resync":
            self._resync(item[1] if len(item) > 1 else None, in_flight)
        elif kind == "list":
            path = item[1]
            if self._in_scope(path) and self._descends(path):
                read = self._read(path, walk=0, data=False, children=True)
                if read is not None:
                    in_flight.append(read)
        elif kind == "state":
            in_flight.append(item)  # told in order with the node events around it

    def _read(
        self, path: str, *, walk: int, children: bool = False, data: bool = True
    ) -> Read | None:
        watch = self._sink if self.one_shot else None
        generation = self.client.connection_generation
        try:
            got = None
            if data:
                got = self.client.get_async(path, watch=watch)
            listing = None
            if children:
                listing = self.client.get_children_async(path, watch=watch)
        except (ClientStateError, ConnectionLostError, SessionLost, ZkTimeoutError):
            return None  # the next connection's re-synchronisation reads it
        return Read(path, got, walk, listing, generation=generation)

    def _result(self, pending: Reply[Any]) -> Any:
        return self._replies.result(pending, self.client.settings.connection_timeout)

    def _finish(self, item: Read | tuple[Any, ...], in_flight: collections.deque[Any]) -> None:
        if isinstance(item, tuple):
            if item[0] == "gone":
                self._gone(item[1], item[2])
                return
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
        except NoAuthError:
            self._skip(item.path)
            self._walk_step_done(walk)
            return
        except ZkRecipesError as exc:
            self._read_failed(item, walk, exc)
            return
        self._backoff.note_success(item.path)
        readable_again = item.path in self._unreadable
        if readable_again:
            self._unreadable.discard(item.path)
            log.info("%s on %s: %s is readable again", self._name, self.root, item.path)
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
        elif readable_again and self._descends(item.path):
            read = self._read(item.path, walk=0, data=False, children=True)  # what is below it
            if read is not None:
                in_flight.append(read)
        self._walk_step_done(walk)

    def _read_failed(self, item: Read, walk: Walk | None, exc: ZkRecipesError) -> None:
        """A read failed with neither NoNode nor NoAuth (``reads.py`` says what it becomes)."""
        log.debug("%s on %s: reading %s: %s", self._name, self.root, item.path, exc)
        kind = "list" if item.data is None else "event"
        if not isinstance(exc, (SessionLost, ClientStateError)) and self._live(item.generation):
            # A read error on a connection that is still up: the same read, later.
            if walk is not None:  # still one of the walk's: it stays outstanding
                todo = (item.path, walk.number, item.data is not None, item.children is not None)
                self._retry_later(item.path, "todo", (*todo, item.pzxid))
            else:
                self._retry_later(item.path, "work", (kind, item.path))
            return
        if walk is not None:
            walk.failed = True  # the next connection's walk does it again
        elif self.client.state is not None and self.client.state.is_connected:
            self._queue((kind, item.path))  # a newer connection is up: read it there
        elif item.data is not None:
            self._dirty.add(item.path)  # the next connection's resync reads it
        self._walk_step_done(walk)

    def _new_children(self, path: str, names: list[str], in_flight: collections.deque[Any]) -> None:
        """Outside a walk: a listing of ``path``; read the children it adds, and theirs."""
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
            made = self._result(self.client.exists_async(self.root, watch=self._sink))
        except ZkRecipesError:
            return  # the next connection's walk tries again
        if made is not None:
            self._queue(("event", self.root))

    # -- applying what was read ---------------------------------------------
    def _apply(self, path: str, data: bytes, stat: ZnodeStat) -> CachedNode | None:
        """Apply one read of ``path`` (``CacheStore.apply``); returns the node cached before it."""
        if self._walk is not None:
            self._walk.seen.add(path)  # touched while a walk runs: not "unseen"
        old, events = self.store.apply(CachedNode(path, data if self._cache_data else None, stat))
        self._emit(events)
        return old

    def _gone(self, path: str, before: int) -> None:
        """A DELETED notification, applied without a read (the module note).

        ``before``: the zxid of the newest reply read ahead of the
        notification. A cached node made no later than that is the one
        deleted; one made later was read after the delete, so it is a new
        node of the same name, and the read that found it was right.
        """
        cached = self.store.get(path)
        if cached is not None and cached.stat.czxid <= before:
            self._apply_gone(path)
        elif cached is None and path in self._unreadable:
            self._unreadable.discard(path)

    def _zxid_now(self) -> int:
        """The Sink's stamp of a DELETED notification (on the connection's thread)."""
        return self.client.last_zxid

    def _apply_gone(self, path: str) -> None:
        if self._walk is not None:
            self._walk.seen.add(path)
        if self._unreadable:
            self._unreadable.discard(path)
        self._emit(self.store.remove(path))

    def _skip(self, path: str) -> None:
        """NoAuth: ``path`` is not cached, nor below it; said once while it stays so."""
        if self._walk is not None:
            self._walk.seen.add(path)  # there, not gone: its own entry stays until read
        events = self.store.remove(path)
        if path not in self._unreadable:
            prefix = path.rstrip("/") + "/"
            self._unreadable = {p for p in self._unreadable if not p.startswith(prefix)}
            self._unreadable.add(path)
            log.warning(
                "%s on %s: no permission to read %s (NoAuth): it and the nodes below it "
                "are not cached; it is read again at each resync and at its next change",
                self._name,
                self.root,
                path,
            )
            events.append(CacheEvent(CacheEventType.UNREADABLE, unreadable=path))
        self._emit(events)

    def _prune_children(self, path: str, listed: set[str]) -> None:
        """A listing of ``path``: cached children it no longer has are gone."""
        self._emit(self.store.prune(path, listed))

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
        """Stop for good: FAILED to the listeners, every wait and read raises ``failure``."""
        self.store.failure = failure
        log.error("%s", failure)
        self._emit([CacheEvent(CacheEventType.FAILED, error=failure)])
        self.initialized.set()  # the waits end now, and raise it (_waited)
        self.synced.set()
        self.close()
