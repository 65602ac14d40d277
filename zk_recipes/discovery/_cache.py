"""ServiceCache: the instances of one service, kept equal to the server by a ChildrenCache.

Built on the caches engine (one persistent watch on ``<base>/<name>``, exact
across reconnects, the server's diff on a resumed session), unlike Curator's
ServiceCacheImpl it never creates the name's directory and lists instances in
a stable order (by id, where Curator's is hash order). A node that does not
parse is skipped, logged and counted once per version, and never hides the
others (a Java ServiceCache drops it silently).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Protocol

from zk_recipes import _paths
from zk_recipes._cache.children import ChildrenCache
from zk_recipes._cache.values import CacheEvent, CacheEventType
from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import StateChange
from zk_recipes._errors import RecipeUsageError
from zk_recipes.discovery._instance import ServiceInstance, check_node_name
from zk_recipes.discovery._reading import log, read_instance


class Discovery(Protocol):
    """What a cache or a provider needs of its ServiceDiscovery."""

    client: ZkClient
    base_path: str


@dataclasses.dataclass(frozen=True, slots=True)
class ServiceCacheEvent:
    """A change of the cached instances (CREATED, CHANGED, DELETED), or the cache's state.

    INITIALIZED and RESYNCED say the cache equals the server; CONNECTION
    passes the client's state on (SUSPENDED: it may be behind).
    """

    type: CacheEventType
    instance: ServiceInstance | None = None
    old: ServiceInstance | None = None
    state: StateChange | None = None


ServiceCacheListener = Callable[[ServiceCacheEvent], object]


class ServiceCache:
    """Every instance of ``name``, with an event per change; ``start()`` it, ``close()`` it."""

    def __init__(self, discovery: Discovery, name: str) -> None:
        self.name = check_node_name(name, "a service name")
        self.discovery = discovery
        self.path = _paths.join(discovery.base_path, name)
        self._children = ChildrenCache(discovery.client, self.path)
        self._lock = threading.Lock()
        self._instances: dict[str, ServiceInstance] = {}
        self._listeners: list[ServiceCacheListener] = []
        self._children.listen(self._on_event)
        self._started = False

    def start(self, timeout: float | None = None) -> ServiceCache:
        """Start, and wait for the first load up to ``timeout`` (default: don't wait)."""
        if self._started:
            raise RecipeUsageError(f"the ServiceCache of {self.name} was started already")
        self._started = True
        self._children.start()
        if timeout is not None:
            self._children.wait_initialized(timeout)
        return self

    def close(self) -> None:
        """Stop watching; idempotent."""
        self._children.close()

    @property
    def started(self) -> bool:
        """Whether ``start()`` was called (a ServiceCache starts once)."""
        return self._started

    def __enter__(self) -> ServiceCache:
        """``with cache:`` or ``with cache.start(timeout):``: started once, closed at the end."""
        return self if self._started else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def wait_initialized(self, timeout: float | None = None) -> bool:
        """Wait for the first load to end (True), or ``timeout`` (False).

        ``RecipeUsageError`` before ``start()``; the error that stopped the
        cache, if one did.
        """
        return self._children.wait_initialized(timeout)

    def instances(self) -> list[ServiceInstance]:
        """The cached instances, sorted by id."""
        with self._lock:
            return [self._instances[key] for key in sorted(self._instances)]

    def listen(self, listener: ServiceCacheListener) -> Callable[[], None]:
        """Call ``listener(ServiceCacheEvent)`` from now on, on the cache's thread.

        Returns a function that removes it.
        """
        if not callable(listener):
            raise RecipeUsageError(f"a ServiceCache listener must be callable, got {listener!r}")
        with self._lock:
            self._listeners = [*self._listeners, listener]

        def stop() -> None:
            with self._lock:
                self._listeners = [x for x in self._listeners if x is not listener]

        return stop

    # -- from the children cache (its worker thread) --------------------------
    def _on_event(self, event: CacheEvent) -> None:
        kind = event.type
        told: ServiceCacheEvent
        if kind in (CacheEventType.CREATED, CacheEventType.CHANGED):
            assert event.node is not None
            node_id = _paths.name_of(event.node.path)
            instance = read_instance(self.name, event.node.path, event.node.data or b"")
            with self._lock:
                old = self._instances.pop(node_id, None)
                if instance is not None:
                    self._instances[node_id] = instance
            if instance is None:
                if old is None:
                    return
                told = ServiceCacheEvent(CacheEventType.DELETED, old=old)
            else:
                told = ServiceCacheEvent(
                    CacheEventType.CHANGED if old is not None else CacheEventType.CREATED,
                    instance=instance,
                    old=old,
                )
        elif kind is CacheEventType.DELETED:
            assert event.old is not None
            with self._lock:
                old = self._instances.pop(_paths.name_of(event.old.path), None)
            if old is None:
                return
            told = ServiceCacheEvent(CacheEventType.DELETED, old=old)
        elif kind is CacheEventType.UNREADABLE:
            return  # an instance node we may not read: skipped (a DELETED came if it was here)
        else:
            told = ServiceCacheEvent(kind, state=event.state)
        for listener in self._listeners:
            try:
                listener(told)
            except Exception:
                log.exception("a ServiceCache listener of %s raised on %s", self.name, told.type)

    def __repr__(self) -> str:
        return f"<ServiceCache {self.path}: {len(self._instances)} instances>"
