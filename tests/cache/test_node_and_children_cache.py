"""NodeCache and ChildrenCache: the engine's faces for one node and for one node's children."""

from __future__ import annotations

import pytest

from zk_recipes import (
    CacheEvent,
    CacheEventType,
    ChildrenCache,
    ChildrenStartMode,
    ConfigurationError,
    NodeCache,
)
from zk_recipes.testing import Recorder, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

CREATED, CHANGED, DELETED = CacheEventType.CREATED, CacheEventType.CHANGED, CacheEventType.DELETED


def _pairs(events: Recorder[CacheEvent]) -> list[tuple[str, str | None]]:
    return [
        (e.type.value, e.path) for e in events.snapshot() if e.type is not CacheEventType.CONNECTION
    ]


def test_a_node_cache_follows_one_node_through_its_life(zk_client_factory: ClientFactory) -> None:
    writer = zk_client_factory()
    events = Recorder[CacheEvent]()
    cache = NodeCache(zk_client_factory(), "/one/node")
    cache.listen(events)
    with cache:
        assert cache.wait_initialized(10)
        assert cache.current() is None
        writer.create("/one/node", b"a", parents=True)
        events.wait_for(lambda e: e.type is CREATED)
        writer.create("/one/node/child")  # not the node's own change: nothing
        writer.set("/one/node", b"b")
        events.wait_for(lambda e: e.type is CHANGED)
        node = cache.current()
        assert node is not None
        assert node.data == b"b"
        writer.delete("/one/node", recursive=True)
        events.wait_for(lambda e: e.type is DELETED)
        assert cache.current() is None
    assert _pairs(events) == [
        ("INITIALIZED", None),
        ("CREATED", "/one/node"),
        ("CHANGED", "/one/node"),
        ("DELETED", "/one/node"),
    ]


def test_a_children_cache_shows_the_children_only_in_each_start_mode(
    zk_client_factory: ClientFactory,
) -> None:
    writer = zk_client_factory()
    writer.create("/kids/a", b"1", parents=True)
    writer.create("/kids/b/grandchild", parents=True)
    seen: dict[ChildrenStartMode, Recorder[CacheEvent]] = {}
    caches = []
    for mode in ChildrenStartMode:
        cache = ChildrenCache(zk_client_factory(), "/kids", mode=mode)
        seen[mode] = Recorder[CacheEvent]()
        cache.listen(seen[mode])
        caches.append(cache.start())
    try:
        for cache in caches:
            assert cache.wait_initialized(10)
            assert sorted(cache.current()) == ["/kids/a", "/kids/b"]
        writer.create("/kids/c")
        writer.create("/kids/b/grandchild/deeper")  # deeper than the children: nothing
        for mode in ChildrenStartMode:
            seen[mode].wait_for(lambda e: e.path == "/kids/c")
        initial = sorted([("CREATED", "/kids/a"), ("CREATED", "/kids/b")])
        post = _pairs(seen[ChildrenStartMode.POST_INITIALIZED])
        assert sorted(post[:2]) == initial
        assert post[2:] == [("INITIALIZED", None), ("CREATED", "/kids/c")]
        normal = _pairs(seen[ChildrenStartMode.NORMAL])
        assert sorted(normal[:2]) == initial
        assert normal[2:] == [("CREATED", "/kids/c")]
        assert _pairs(seen[ChildrenStartMode.BUILD_INITIAL]) == [("CREATED", "/kids/c")]
        wait_until(lambda: len(caches[0].current()) == 3, "three children", timeout=10)
        # One child by path, as Curator's getCurrentData(path); only children.
        child = caches[0].get("/kids/a")
        assert child is not None
        assert child.data == b"1"
        assert caches[0].get("/kids/none") is None
        for other in ("/kids", "/kids/b/grandchild", "/elsewhere"):
            with pytest.raises(ConfigurationError, match="/kids"):
                caches[0].get(other)
    finally:
        for cache in caches:
            cache.close()
