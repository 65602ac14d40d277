"""ChildrenCache: the children of one node, kept equal to the server (Curator's PathChildrenCache).

The engine caches the parent too (its ``pzxid`` says when its children
changed); the face shows and tells the children only. Start modes as in
Curator: ``POST_INITIALIZED`` (CREATED per child, then INITIALIZED),
``NORMAL`` (CREATED per child, no INITIALIZED) and ``BUILD_INITIAL``
(``start()`` returns once loaded, with no events for the first set). Unlike
Curator's, it never creates the parent.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping
from typing import final

from zk_recipes._cache.engine import CacheEngine, Listener
from zk_recipes._cache.face import CacheFace
from zk_recipes._cache.values import CachedNode, CacheEvent, CacheEventType
from zk_recipes._client.client import ZkClient
from zk_recipes._errors import ConfigurationError, ConnectTimeoutError

#: Events about one node: of the parent itself, a ChildrenCache tells none.
_NODE_EVENTS = frozenset({CacheEventType.CREATED, CacheEventType.CHANGED, CacheEventType.DELETED})
#: Told in every start mode, during the first load too.
_ALWAYS_TOLD = frozenset({CacheEventType.UNREADABLE, CacheEventType.FAILED})


class ChildrenStartMode(enum.Enum):
    """How a ChildrenCache starts (Curator's ``PathChildrenCache.StartMode``)."""

    #: CREATED for each child there, then INITIALIZED.
    POST_INITIALIZED = "POST_INITIALIZED"
    #: CREATED for each child there, and no INITIALIZED.
    NORMAL = "NORMAL"
    #: ``start()`` returns once loaded; no event for the children found then.
    BUILD_INITIAL = "BUILD_INITIAL"


@final
class ChildrenCache(CacheFace):
    """The children of ``path``: their data and stats, and an event per change."""

    def __init__(
        self,
        client: ZkClient,
        path: str,
        *,
        cache_data: bool = True,
        mode: ChildrenStartMode = ChildrenStartMode.POST_INITIALIZED,
    ) -> None:
        self._engine = CacheEngine(
            client, path, recursive=True, max_depth=1, cache_data=cache_data, name="ChildrenCache"
        )
        self.path = self._engine.root
        self.mode = ChildrenStartMode(mode)
        self._loaded = threading.Event()

    def start(self, timeout: float | None = None) -> ChildrenCache:
        """Start; in ``BUILD_INITIAL`` mode, return once loaded (ConnectTimeoutError after
        ``timeout``, default the connection timeout)."""
        self._engine.listen(self._mark_loaded)
        self._engine.start()
        if self.mode is ChildrenStartMode.BUILD_INITIAL:
            wait = (
                timeout if timeout is not None else self._engine.client.settings.connection_timeout
            )
            if not self._engine.wait_initialized(wait):
                raise ConnectTimeoutError(
                    f"ChildrenCache on {self.path} did not load within {wait:g} s"
                )
        return self

    def _mark_loaded(self, event: CacheEvent) -> None:
        if event.type is CacheEventType.INITIALIZED:
            self._loaded.set()

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Events about the children (and INITIALIZED, RESYNCED, CONNECTION) as the mode says.

        UNREADABLE (a child, or the parent, the client may not read) and
        FAILED come too.
        """
        root = self.path
        mode = self.mode
        loaded = self._loaded

        def shown(event: CacheEvent) -> None:
            told = event.type in _ALWAYS_TOLD
            if event.path == root and event.type in _NODE_EVENTS:
                return  # the parent itself
            if event.type is CacheEventType.INITIALIZED:
                if mode is ChildrenStartMode.POST_INITIALIZED:
                    listener(event)
                return
            if mode is ChildrenStartMode.BUILD_INITIAL and not loaded.is_set() and not told:
                return  # the first set, which start() waited for
            listener(event)

        return self._engine.listen(shown)

    def current(self) -> Mapping[str, CachedNode]:
        """The cached children by path, sorted by name (``RecipeUsageError`` before ``start()``)."""
        nodes = self._engine.current()
        return {path: node for path, node in sorted(nodes.items()) if path != self.path}

    def get(self, path: str) -> CachedNode | None:
        """The child at ``path`` (a full path, as in ``current()``), or None if not cached.

        Curator's ``getCurrentData(path)``. ``ConfigurationError`` for a path
        that is not a child of the cache's path.
        """
        if self._under_root(path) == self.path or "/" in path[len(self.path) + 1 :]:
            raise ConfigurationError(
                f"{path!r} is not a child of the ChildrenCache's path {self.path}: it caches "
                f"the children of {self.path} only; read other paths from the client"
            )
        return self._engine.get(path)

    def __repr__(self) -> str:
        return f"<ChildrenCache {self.path}>"
