"""Our TreeCache and Curator 5.4's CuratorCache on one tree: the same content, after a cut too.

The Java cache stays connected; ours goes through a proxy that is cut while
the tree changes (a subtree deleted and made again, nodes changed and
created). After our RESYNCED both caches hold exactly what the server holds:
the same paths, data and ``mzxid``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from zk_recipes import CacheEvent, CacheEventType, TreeCache, ZkClient
from zk_recipes.testing import Recorder, TcpProxy, ZooKeeperServer
from zk_recipes.testing.pytest_plugin import ClientFactory

from .curator import CuratorPeer, PeerFactory


def _java(peer: CuratorPeer, handle: str, namespace: str) -> dict[str, tuple[bytes, int]]:
    found: dict[str, tuple[bytes, int]] = {}
    for entry in peer.call(f"cachedump {handle}").split():
        path, rest = entry.rsplit("=", 1)
        data, mzxid = rest.split(":")
        found[path[len(namespace) :] or "/"] = (bytes.fromhex(data), int(mzxid, 16))
    return found


def _ours(cache: TreeCache) -> dict[str, tuple[bytes, int]]:
    return {p: (n.data or b"", n.stat.mzxid) for p, n in cache.current().items()}


def _agree(peer: CuratorPeer, ours: TreeCache, namespace: str) -> None:
    """Wait until both caches hold the same tree (each is told on its own thread)."""
    deadline = time.monotonic() + 20
    while (java := _java(peer, "java", namespace)) != (mine := _ours(ours)):
        assert time.monotonic() < deadline, f"the caches never agreed: {java} != {mine}"
        time.sleep(0.1)


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def test_curator_cache_and_ours_hold_the_same_tree_through_a_cut(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
    proxied: TcpProxy,
) -> None:
    writer: ZkClient = zk_client_factory()
    for group in ("keep", "change", "gone"):
        for index in range(10):
            writer.create(f"/tree/{group}/n{index}", f"{group}{index}".encode(), parents=True)
    peer = curator_peer_factory(zk_hosts)
    peer.call(f"cache java {zk_namespace}/tree")
    peer.wait_event("java initialized", timeout=20)
    events = Recorder[CacheEvent]()
    ours = TreeCache(zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0), "/tree")
    ours.listen(events)
    with ours:
        assert ours.wait_initialized(20)
        assert _ours(ours) == _java(peer, "java", zk_namespace)
        mark = events.mark()
        proxied.blackhole()
        writer.delete("/tree/gone", recursive=True)
        writer.create("/tree/gone", b"again")
        for index in range(10):
            writer.set(f"/tree/change/n{index}", b"changed")
            writer.create(f"/tree/new/n{index}", b"new", parents=True)
        proxied.heal()
        events.wait_for(lambda e: e.type is CacheEventType.RESYNCED, after=mark, timeout=30)
        _agree(peer, ours, zk_namespace)
        assert len(_ours(ours)) == 1 + 3 + 10 + 10 + 1 + 10  # /tree, 3 dirs + /new, nodes
        # The other direction: nodes Curator writes (a lock's) reach our cache as they are.
        peer.call(f"mutex jm {zk_namespace}/tree/locks")
        held = peer.call("acquire jm 5000")
        assert held.startswith("acquired ")
        node = held.split()[1][len(zk_namespace) :]
        created = events.wait_for(lambda e: e.type is CacheEventType.CREATED and e.path == node)
        assert created.node is not None
        assert created.node.data == bytes.fromhex(peer.call(f"getdata {zk_namespace}{node}"))
        peer.call("release jm")
        events.wait_for(lambda e: e.type is CacheEventType.DELETED and e.path == node)
        _agree(peer, ours, zk_namespace)
    peer.call("close jm")
    peer.call("close java")
