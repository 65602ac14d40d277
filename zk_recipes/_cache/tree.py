"""TreeCache: a subtree, kept equal to the server (Curator's TreeCache and CuratorCache).

One persistent recursive watch on the root, whatever the tree's size (kazoo's
TreeCache and Curator's TreeCache hold two watches per node); the engine
(``engine.py``) says how every change is read and applied, and what a
reconnect costs. The root need not exist: it is waited for, never created.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import final

from zk_recipes._cache.engine import CacheEngine, Listener, Selector
from zk_recipes._cache.values import CachedNode
from zk_recipes._client.client import ZkClient
from zk_recipes._errors import ConfigurationError


@final
class TreeCache:
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

    def start(self) -> TreeCache:
        """Start loading in the background (INITIALIZED when done); returns the cache."""
        self._engine.start()
        return self

    def close(self) -> None:
        """Stop watching; idempotent. Listeners hear nothing more."""
        self._engine.close()

    def __enter__(self) -> TreeCache:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(CacheEvent)`` for every event from now on; returns its remover."""
        return self._engine.listen(listener)

    def wait_initialized(self, timeout: float | None = None) -> bool:
        """Wait for the first load to end (True), or ``timeout`` (False)."""
        return self._engine.initialized.wait(timeout)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until the cache equals the server again (after a cut: RESYNCED)."""
        return self._engine.wait_synced(timeout)

    def current(self) -> Mapping[str, CachedNode]:
        """Every cached node by path: a consistent snapshot."""
        return self._engine.current()

    def get(self, path: str) -> CachedNode | None:
        return self._engine.get(path)

    def children(self, path: str) -> list[str]:
        """The cached children's names of ``path``, sorted."""
        return self._engine.children(path)

    def __repr__(self) -> str:
        return f"<TreeCache {self.path} {self._engine.size()} nodes>"
