"""A cached node found made again: only what belonged to the old one goes.

After a reconnect the walk can read a child before its parent. When the
parent turns out to be a new node of the same name (another czxid), the
child read first, made after the new parent, is the new parent's: it stays.
Forgetting the whole subtree showed that child DELETED and then CREATED
again, the same node (found by tests/cache/test_cache_stress.py under load).
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
