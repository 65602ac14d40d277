"""The caches on a server without persistent watches: one-shot watches, the same events.

The server runs ZooKeeper's ``WatchManagerOptimized``, which refuses
``addWatch`` (MarshallingError): the caches say so once and fall back to a
data and a child watch per node, re-armed as they fire and re-read after
every reconnect. The scenarios of test_tree_cache.py run again here.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.cache.test_cache_property import OPERATIONS, run_operations
from tests.cache.test_tree_cache import _cached, _node_events, _server_tree
from zk_recipes import CacheEvent, CacheEventType, NodeCache, TreeCache, ZkClient
from zk_recipes.testing import (
    DEFAULT_JVM_OPTIONS,
    Recorder,
    TcpProxy,
    ZooKeeperServer,
    expire_session,
    wait_until,
)

CREATED, CHANGED, DELETED = CacheEventType.CREATED, CacheEventType.CHANGED, CacheEventType.DELETED
RESYNCED = CacheEventType.RESYNCED
OPTIMIZED = "org.apache.zookeeper.server.watch.WatchManagerOptimized"
_roots = itertools.count()


@pytest.fixture(scope="module")
def server() -> Iterator[ZooKeeperServer]:
    options = (*DEFAULT_JVM_OPTIONS, f"-Dzookeeper.watchManagerName={OPTIMIZED}")
    with ZooKeeperServer(jvm_options=options) as zk:
        yield zk


@pytest.fixture
def clients(server: ZooKeeperServer) -> Iterator[list[ZkClient]]:
    made: list[ZkClient] = []
    yield made
    for client in made:
        client.close()


def _client(made: list[ZkClient], hosts: str, **options: object) -> ZkClient:
    client = ZkClient(hosts, session_timeout=6.0, **options)  # type: ignore[arg-type]
    made.append(client.start())
    return client


def _root() -> str:
    return f"/fallback{next(_roots)}"


def test_events_in_order_and_a_root_that_comes_and_goes(
    server: ZooKeeperServer, clients: list[ZkClient], caplog: pytest.LogCaptureFixture
) -> None:
    writer = _client(clients, server.connect_string)
    root = _root()
    events = Recorder[CacheEvent]()
    cache = TreeCache(_client(clients, server.connect_string), root)
    cache.listen(events)
    with cache:
        assert cache.wait_initialized(10)
        assert cache._engine.one_shot
        writer.create(f"{root}/a", b"1", parents=True)
        events.wait_for(lambda e: e.type is CREATED and e.path == f"{root}/a")
        writer.create(f"{root}/a/b", b"2")
        events.wait_for(lambda e: e.type is CREATED and e.path == f"{root}/a/b")
        writer.set(f"{root}/a/b", b"3")
        events.wait_for(lambda e: e.type is CHANGED)
        writer.delete(root, recursive=True)
        events.wait_for(lambda e: e.type is DELETED and e.path == root)
        writer.create(f"{root}/again", parents=True)
        events.wait_for(lambda e: e.type is CREATED and e.path == f"{root}/again")
        wait_until(lambda: _cached(cache) == _server_tree(writer, root), "equal", timeout=10)
        assert _node_events(events)[:5] == [
            ("INITIALIZED", None),
            ("CREATED", root),
            ("CREATED", f"{root}/a"),
            ("CREATED", f"{root}/a/b"),
            ("CHANGED", f"{root}/a/b"),
        ]
    assert "no persistent watches" in caplog.text or not caplog.records  # said once a process


def test_after_a_cut_the_events_are_the_differences(
    server: ZooKeeperServer, clients: list[ZkClient]
) -> None:
    writer = _client(clients, server.connect_string)
    root = _root()
    for group in ("keep", "change", "gone"):
        for index in range(5):
            writer.create(f"{root}/{group}/n{index}", b"0", parents=True)
    with TcpProxy(server.host, server.port) as proxy:
        cache = TreeCache(_client(clients, proxy.connect_string), root)
        events = Recorder[CacheEvent]()
        cache.listen(events)
        with cache:
            assert cache.wait_initialized(10)
            mark = events.mark()
            proxy.blackhole()
            writer.delete(f"{root}/gone", recursive=True)
            writer.create(f"{root}/gone")
            for index in range(5):
                writer.set(f"{root}/change/n{index}", b"1")
                writer.create(f"{root}/new/n{index}", parents=True)
            proxy.heal()
            events.wait_for(lambda e: e.type is RESYNCED, after=mark, timeout=30)
            assert _cached(cache) == _server_tree(writer, root)
            assert sorted(_node_events(events, mark)) == sorted(
                [("DELETED", f"{root}/gone/n{i}") for i in range(5)]
                + [("DELETED", f"{root}/gone"), ("CREATED", f"{root}/gone")]
                + [("CHANGED", f"{root}/change/n{i}") for i in range(5)]
                + [("CREATED", f"{root}/new/n{i}") for i in range(5)]
                + [("CREATED", f"{root}/new"), ("RESYNCED", None)]
            )
            # Changes after the cut still arrive: the watches were armed again.
            writer.set(f"{root}/keep/n0", b"later")
            events.wait_for(lambda e: e.type is CHANGED and e.path == f"{root}/keep/n0")


def test_after_expiry_rebuilt_and_a_node_cache(
    server: ZooKeeperServer, clients: list[ZkClient]
) -> None:
    writer = _client(clients, server.connect_string)
    root = _root()
    writer.create(f"{root}/x", b"1", parents=True)
    watcher = _client(clients, server.connect_string)
    events = Recorder[CacheEvent]()
    cache = TreeCache(watcher, root)
    cache.listen(events)
    node_events = Recorder[CacheEvent]()
    node = NodeCache(watcher, f"{root}/x")
    node.listen(node_events)
    with cache, node:
        assert cache.wait_initialized(10)
        assert node.wait_initialized(10)
        mark = events.mark()
        expire_session(watcher, hosts=server.connect_string)
        writer.set(f"{root}/x", b"2")
        events.wait_for(lambda e: e.type is RESYNCED, after=mark, timeout=30)
        wait_until(lambda: _cached(cache) == _server_tree(writer, root), "equal", timeout=10)
        node_events.wait_for(lambda e: e.type is CHANGED, timeout=30)
        current = node.current()
        assert current is not None
        assert current.data == b"2"
        writer.set(f"{root}/x", b"3")
        node_events.wait_for(lambda e: e.type is CHANGED, count=2)


@settings(
    max_examples=4,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS)
def test_random_operations_cuts_and_expiries_end_equal(
    operations: list[tuple[str, str, bytes]], server: ZooKeeperServer
) -> None:
    with (
        TcpProxy(server.host, server.port) as proxy,
        ZkClient(server.connect_string) as writer,
        ZkClient(proxy.connect_string, session_timeout=4.0) as watcher,
    ):
        run_operations(operations, _root(), writer, watcher, proxy, server)
