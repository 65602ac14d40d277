"""What a cache holds: the nodes below its root that its depth, selector and ACLs let in.

``depth`` places a path below the root; ``_in_scope`` says whether a node
(or a path that may become one) is cached: within ``max_depth``, not below a
node this client may not read (NoAuth: ``reads.py``), and chosen by the
selector together with each of its ancestors below the root; ``_descends``
whether the cache holds a node's children. The engine and its walks ask it
before every read.
"""

from __future__ import annotations

from collections.abc import Callable

from zk_recipes import _paths


class Scope:
    """The scope of one cache (``CacheEngine`` sets the fields it reads)."""

    root: str
    _recursive: bool
    _max_depth: int | None
    #: False for a node, or a path that may become one, skips it and all below it.
    _selector: Callable[[str], bool] | None
    _unreadable: set[str]

    def depth(self, path: str) -> int | None:
        """How far below the root ``path`` is (0: the root), None if not under it."""
        root = self.root
        if path == root:
            return 0
        prefix = root if root == "/" else root + "/"
        if not path.startswith(prefix):
            return None
        return path[len(prefix) :].count("/") + 1

    def _in_scope(self, path: str) -> bool:
        depth = self.depth(path)
        if depth is None or (self._max_depth is not None and depth > self._max_depth):
            return False
        if self._unreadable and path != self.root and self._below_unreadable(path):
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

    def _below_unreadable(self, path: str) -> bool:
        while path != self.root:
            path = _paths.parent_of(path)
            if path in self._unreadable:
                return True
        return False

    def _descends(self, path: str) -> bool:
        """Whether the cache holds children of ``path`` (recursive, above max_depth)."""
        if not self._recursive:
            return False
        depth = self.depth(path)
        return self._max_depth is None or depth is None or depth < self._max_depth
