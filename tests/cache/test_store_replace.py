"""A cached node found made again: only what belonged to the old one goes.

After a reconnect the walk can read a child before its parent. When the
parent turns out to be a new node of the same name (another czxid), the
child read first, made after the new parent, is the new parent's: it stays.
Forgetting the whole subtree showed that child DELETED and then CREATED
again, the same node (found by tests/cache/test_cache_stress.py under load).
The same holds a level down: a grandchild read before its grandparent (an
event read sent ahead of the walk's) keeps the older parent it is cached
under until that parent's own read replaces it.
"""

from __future__ import annotations

from zk_recipes._cache.store import CacheStore
from zk_recipes._cache.values import CachedNode, CacheEventType
from zk_recipes._types import ZnodeStat


def _node(path: str, czxid: int) -> CachedNode:
    return CachedNode(path, b"", ZnodeStat(czxid, czxid, 0, 0, 0, 0, 0, 0, 0, 0, czxid))


def test_a_parent_made_again_keeps_the_children_made_after_it() -> None:
    store = CacheStore("/r", "TreeCache", None)
    for path, czxid in [("/r", 1), ("/r/p", 10), ("/r/p/old", 11), ("/r/p/old/deep", 12)]:
        store.apply(_node(path, czxid))
    store.apply(_node("/r/p/new", 20))  # read before the new /r/p: made after it (15)
    old, events = store.apply(_node("/r/p", 15))
    assert old is not None
    assert old.stat.czxid == 10
    assert [(e.type, e.old.path if e.old else e.node.path if e.node else None) for e in events] == [
        (CacheEventType.DELETED, "/r/p/old/deep"),
        (CacheEventType.DELETED, "/r/p/old"),
        (CacheEventType.DELETED, "/r/p"),
        (CacheEventType.CREATED, "/r/p"),
    ]
    assert sorted(store.current()) == ["/r", "/r/p", "/r/p/new"]
    assert sorted(store.children("/r/p")) == ["new"]


def test_a_grandparent_made_again_keeps_a_grandchild_made_after_it_and_its_parent() -> None:
    store = CacheStore("/r", "TreeCache", None)
    for path, czxid in [("/r", 1), ("/r/a", 10), ("/r/a/b", 11), ("/r/a/x", 12)]:
        store.apply(_node(path, czxid))
    store.apply(_node("/r/a/b/c", 33))  # read first; /r/a (31) and /r/a/b (32) were made again
    _, events = store.apply(_node("/r/a", 31))
    assert [(e.type, e.old.path if e.old else e.node.path if e.node else None) for e in events] == [
        (CacheEventType.DELETED, "/r/a/x"),
        (CacheEventType.DELETED, "/r/a"),
        (CacheEventType.CREATED, "/r/a"),
    ]
    assert sorted(store.current()) == ["/r", "/r/a", "/r/a/b", "/r/a/b/c"]
    _, events = store.apply(_node("/r/a/b", 32))  # the parent's own read replaces it
    assert [(e.type, e.old.path if e.old else e.node.path if e.node else None) for e in events] == [
        (CacheEventType.DELETED, "/r/a/b"),
        (CacheEventType.CREATED, "/r/a/b"),
    ]
    assert sorted(store.current()) == ["/r", "/r/a", "/r/a/b", "/r/a/b/c"]
    assert store.children("/r/a/b") == ["c"]
    assert store.children("/r/a") == ["b"]
