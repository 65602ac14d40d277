"""NodeCache: one node, kept equal to the server (Curator's NodeCache, CuratorCache SINGLE_NODE).

One persistent (not recursive) watch on the node, which need not exist and
is never created (Curator's NodeCache creates its parents). Events are
CREATED, CHANGED and DELETED of the node, INITIALIZED, RESYNCED, the
connection's states, UNREADABLE (the client may not read the node) and
FAILED.
"""

from __future__ import annotations

from typing import final

from zk_recipes._cache.engine import CacheEngine
from zk_recipes._cache.face import CacheFace
from zk_recipes._cache.values import CachedNode
from zk_recipes._client.client import ZkClient


@final
class NodeCache(CacheFace):
    """The node at ``path``: ``current()`` is its value, or None while it does not exist."""

    def __init__(self, client: ZkClient, path: str, *, cache_data: bool = True) -> None:
        self._engine = CacheEngine(
            client, path, recursive=False, max_depth=0, cache_data=cache_data, name="NodeCache"
        )
        self.path = self._engine.root

    def current(self) -> CachedNode | None:
        """The node as last read (data and stat), or None while it does not exist.

        None too while it cannot be read (``unreadable``) or before the first
        load; ``RecipeUsageError`` before ``start()``.
        """
        return self._engine.get(self.path)

    def __repr__(self) -> str:
        engine = self._engine
        node = None if engine.closed or engine.store.failure else engine.store.get(self.path)
        return f"<NodeCache {self.path} {'absent' if node is None else f'v{node.stat.version}'}>"
