"""TreeCache: a subtree, kept equal to the server (Curator's TreeCache and CuratorCache).

One persistent recursive watch on the root, whatever the tree's size (kazoo's
TreeCache and Curator's TreeCache hold two watches per node); the engine
(``engine.py``) says how every change is read and applied, and what a
reconnect costs. The root need not exist: it is waited for, never created.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import final

from zk_recipes._cache.engine import CacheEngine, Selector
from zk_recipes._cache.face import CacheFace
from zk_recipes._cache.values import CachedNode
from zk_recipes._client.client import ZkClient
from zk_recipes._errors import ConfigurationError


@final
class TreeCache(CacheFace):
    """Every node under ``path`` (``path`` included), its data and stat, and an event per change.

    ``max_depth``: how deep below ``path`` to cache (0: ``path`` alone; None:
    everything). ``selector(path)``: False skips that node and everything
    below it. ``cache_data=False`` keeps stats only. ``max_nodes``: past it
    the cache stops with ``CacheOverflowError`` instead of growing.

    ``with TreeCache(client, "/config") as cache: cache.wait_initialized(10)``.
    """

    def __init__(
        self,
        client: ZkClient,
        path: str,
        *,
        max_depth: int | None = None,
        selector: Selector | None = None,
        cache_data: bool = True,
        max_nodes: int | None = None,
    ) -> None:
        if max_depth is not None and (isinstance(max_depth, bool) or max_depth < 0):
            raise ConfigurationError(f"max_depth must be >= 0 or None, got {max_depth!r}")
        if max_nodes is not None and (isinstance(max_nodes, bool) or max_nodes < 1):
            raise ConfigurationError(f"max_nodes must be >= 1 or None, got {max_nodes!r}")
        self._engine = CacheEngine(
            client,
            path,
            recursive=True,
            max_depth=max_depth,
            selector=selector,
            cache_data=cache_data,
            max_nodes=max_nodes,
            name="TreeCache",
        )
        self.path = self._engine.root

    def current(self) -> Mapping[str, CachedNode]:
        """Every cached node by path: a consistent snapshot.

        ``RecipeUsageError`` before ``start()``.
        """
        return self._engine.current()

    def get(self, path: str) -> CachedNode | None:
        """The node at ``path`` as last read, or None if it is not cached.

        Not cached: it does not exist, is beyond ``max_depth`` or the
        selector, or cannot be read (``unreadable``). ``ConfigurationError``
        for a path outside the cache's root.
        """
        return self._engine.get(self._under_root(path))

    def children(self, path: str) -> list[str]:
        """The cached children's names of ``path``, sorted.

        ``ConfigurationError`` for a path outside the cache's root.
        """
        return self._engine.children(self._under_root(path))

    def size(self) -> int:
        """How many nodes are cached."""
        return self._engine.size()

    def __repr__(self) -> str:
        return f"<TreeCache {self.path} {self._engine.size()} nodes>"
