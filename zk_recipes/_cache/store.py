"""What a cache holds: nodes by path, an index of each node's children, and what was listed.

Thread-safe: the engine's worker writes, any thread reads. ``children(path)``
reads the parent -> children index (O(children), not a scan of every node,
which is all Curator's CuratorCache storage can do).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Mapping
from types import MappingProxyType

from zk_recipes import _paths
from zk_recipes._cache.values import CachedNode, CacheEvent, CacheEventType
from zk_recipes._errors import CacheOverflowError, ZkRecipesError


class CacheStore:
    """The nodes of one cache and its children index; ``failure`` once the cache stopped."""

    def __init__(self, root: str, what: str, max_nodes: int | None) -> None:
        self._root = root
        self._what = what
        self._max_nodes = max_nodes
        self._lock = threading.Lock()
        self._nodes: dict[str, CachedNode] = {}
        self._children: dict[str, set[str]] = {}
        #: Directory -> its ``pzxid`` when a completed walk last listed it.
        self._listed: dict[str, int] = {}
        self.failure: ZkRecipesError | None = None

    # -- reads (any thread) ------------------------------------------------
    def _check(self) -> None:
        if self.failure is not None:
            raise self.failure

    def current(self) -> Mapping[str, CachedNode]:
        with self._lock:
            self._check()
            return MappingProxyType(dict(self._nodes))

    def get(self, path: str) -> CachedNode | None:
        with self._lock:
            self._check()
            return self._nodes.get(path)

    def children(self, path: str) -> list[str]:
        with self._lock:
            self._check()
            return sorted(self._children.get(path, ()))

    def size(self) -> int:
        with self._lock:
            return len(self._nodes)

    def paths(self) -> list[str]:
        with self._lock:
            return list(self._nodes)

    def listed_at(self, path: str) -> int | None:
        with self._lock:
            return self._listed.get(path)

    # -- writes (the engine's worker) -----------------------------------------
    def note_listed(self, listed: Mapping[str, int]) -> None:
        with self._lock:
            self._listed.update(listed)

    def put(self, node: CachedNode) -> None:
        """Store ``node``; CacheOverflowError past ``max_nodes``."""
        with self._lock:
            if node.path not in self._nodes:
                if self._max_nodes is not None and len(self._nodes) >= self._max_nodes:
                    raise CacheOverflowError(
                        f"{self._what} on {self._root} holds max_nodes={self._max_nodes} nodes "
                        f"and {node.path} would be one more: it stopped. Raise max_nodes, or "
                        "cache a smaller part of the tree (max_depth=, selector=)"
                    )
                if node.path != self._root:
                    parent = _paths.parent_of(node.path)
                    self._children.setdefault(parent, set()).add(_paths.name_of(node.path))
            self._nodes[node.path] = node

    def apply(self, node: CachedNode) -> tuple[CachedNode | None, list[CacheEvent]]:
        """Apply a read of ``node.path`` (the rules in engine.py): what was cached, and the events.

        Not cached: CREATED. Another ``czxid``: DELETED of it and below, then
        CREATED. A newer ``mzxid``: CHANGED. The same ``mzxid`` with a newer
        ``pzxid``: the stat kept, no event. Older: a stale read, dropped.
        """
        old = self.get(node.path)
        if old is None:
            self.put(node)
            return old, [CacheEvent(CacheEventType.CREATED, node=node)]
        if old.stat.czxid != node.stat.czxid:
            events = self._replace(node.path, node.stat.czxid)
            self.put(node)
            return old, [*events, CacheEvent(CacheEventType.CREATED, node=node)]
        if node.stat.mzxid > old.stat.mzxid:
            self.put(node)
            return old, [CacheEvent(CacheEventType.CHANGED, node=node, old=old)]
        if node.stat.mzxid == old.stat.mzxid and node.stat.pzxid > old.stat.pzxid:
            self.put(dataclasses.replace(old, stat=node.stat))  # children moved: no event
        return old, []

    def prune(self, path: str, listed: set[str]) -> list[CacheEvent]:
        """A listing of ``path``: its cached children not in ``listed`` are gone (DELETED)."""
        events: list[CacheEvent] = []
        for name in sorted(set(self.children(path)) - listed):
            events.extend(self.remove(_paths.join(path, name)))
        return events

    def _replace(self, path: str, czxid: int) -> list[CacheEvent]:
        """``path`` is another node now, made at ``czxid``: the old one and its subtree go.

        What is cached below and was made after the new node (a higher
        czxid: zxids only grow) was read after the new node existed, so it
        is the new node's and stays; so do the older nodes between it and
        ``path`` (gone on the server too, but each is read again, as the
        diff or the walk flagged it, and replaced then): the store keeps
        every cached node under a cached parent. The rest goes (DELETED,
        deepest first, the old node last). Forgetting more showed a child
        DELETED and then CREATED again, the same node, when the walk after
        a reconnect (or an event read sent before it) read it before its
        parent or grandparent.
        """
        with self._lock:
            below = [p for p in self._subtree(path) if p != path]
            staying: set[str] = set()
            for candidate in below:
                cached = self._nodes.get(candidate)
                if cached is not None and cached.stat.czxid >= czxid:
                    keep = candidate
                    while keep != path and keep not in staying:
                        staying.add(keep)
                        keep = _paths.parent_of(keep)
            doomed = [path, *(p for p in below if p not in staying)]
            return self._forget(doomed, replaced=path)

    def remove(self, path: str) -> list[CacheEvent]:
        """Forget ``path`` and everything cached below it: DELETED events, deepest first."""
        with self._lock:
            return self._forget(list(self._subtree(path)))

    def _forget(self, doomed: list[str], replaced: str | None = None) -> list[CacheEvent]:
        """Forget ``doomed`` (parents before children), deepest first (under _lock).

        ``replaced`` is put back at once: it keeps its place under its parent
        and what stays below it.
        """
        events: list[CacheEvent] = []
        for gone in reversed(doomed):
            old = self._nodes.pop(gone, None)
            self._listed.pop(gone, None)
            if gone != replaced:
                self._unlink(gone)
            if old is not None:
                events.append(CacheEvent(CacheEventType.DELETED, old=old))
        return events

    def _unlink(self, path: str) -> None:
        """Drop ``path``'s children entry and its name from its parent's (under _lock)."""
        self._children.pop(path, None)
        if path == self._root:
            return
        parent = _paths.parent_of(path)
        siblings = self._children.get(parent)
        if siblings is not None:
            siblings.discard(_paths.name_of(path))
            if not siblings:
                del self._children[parent]

    def _subtree(self, path: str) -> Iterator[str]:
        """``path``, then every cached path below it, parents before children (under _lock)."""
        if path in self._nodes or path in self._children:
            yield path
        for name in sorted(self._children.get(path, ())):
            yield from self._subtree(_paths.join(path, name))
