"""Caches of both watch modes on one path of one client: every cache hears every change.

A NodeCache watches its node with a plain persistent watch; a TreeCache, a
ChildrenCache and a ServiceCache watch theirs recursively. On ZooKeeper
3.6-3.8 a plain ``addWatch`` after a recursive one on the same path and
connection made the recursive one plain: the TreeCache went deaf below its
root (review 3, C1). Here each pair shares one client and one path, started
in both orders, and each cache must equal the server after changes, after a
reconnect and after a new session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import pytest

from zk_recipes import (
    ChildrenCache,
    NodeCache,
    NoNodeError,
    ServiceCache,
    ServiceDiscovery,
    ServiceInstance,
    TreeCache,
    ZkClient,
)
from zk_recipes.testing import TcpProxy, ZooKeeperServer, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

#: Each pair: the cache started first, then the other, on one path of one client.
PAIRS = [
    ("node", "tree"),
    ("tree", "node"),
    ("children", "tree"),
    ("tree", "children"),
    ("service", "node"),
    ("node", "service"),
]


@dataclasses.dataclass
class _Base:
    """A ServiceCache's view of its ServiceDiscovery (the ``Discovery`` protocol)."""

    client: ZkClient
    base_path: str


def _tree(client: ZkClient, root: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}

    def visit(path: str) -> None:
        try:
            found[path] = client.get(path)[0]
            names = client.get_children(path)
        except NoNodeError:
            return
        for name in names:
            visit(f"{path}/{name}")

    visit(root)
    return found


Check = Callable[[], bool]


def _checks(kind: str, cache: object, writer: ZkClient, path: str) -> Check:
    """True once ``cache`` equals what the server holds at ``path``."""

    def children() -> dict[str, bytes]:
        return {p: d for p, d in _tree(writer, path).items() if p.count("/") == path.count("/") + 1}

    if isinstance(cache, NodeCache):
        return lambda: (node := cache.current()) is not None and node.data == writer.get(path)[0]
    if isinstance(cache, TreeCache):
        return lambda: {p: n.data for p, n in cache.current().items()} == _tree(writer, path)
    if isinstance(cache, ChildrenCache):
        return lambda: {p: n.data for p, n in cache.current().items()} == children()
    assert isinstance(cache, ServiceCache), kind
    return lambda: (
        sorted(i.id for i in cache.instances()) == sorted(p.rsplit("/", 1)[1] for p in children())
    )


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def test_every_cache_of_a_shared_path_hears_every_change_in_either_order(
    zk_client_factory: ClientFactory, proxied: TcpProxy, zk_hosts: str
) -> None:
    watcher = zk_client_factory(hosts=proxied.connect_string, session_timeout=4.0)
    writer = zk_client_factory()
    registrar = ServiceDiscovery(writer, "/svc").start()
    caches: list[NodeCache | TreeCache | ChildrenCache | ServiceCache] = []
    checks: list[Check] = []
    changes: list[Callable[[int], None]] = []
    for index, pair in enumerate(PAIRS):
        if "service" in pair:
            name = f"s{index}"
            path = f"/svc/{name}"

            def change(round_: int, where: str = name) -> None:
                registrar.register(ServiceInstance(name=where, id=f"i{round_}", address=None))
                writer.set(f"/svc/{where}", f"r{round_}".encode())

        else:
            path = f"/p{index}"

            def change(round_: int, where: str = path) -> None:
                writer.create(f"{where}/c{round_}/deep", f"r{round_}".encode(), parents=True)
                writer.set(f"{where}/c{round_}", b"x")
                writer.set(where, f"r{round_}".encode())

        writer.create(path, b"start", parents=True)
        changes.append(change)
        for kind in pair:
            cache: NodeCache | TreeCache | ChildrenCache | ServiceCache
            if kind == "node":
                cache = NodeCache(watcher, path)
            elif kind == "tree":
                cache = TreeCache(watcher, path)
            elif kind == "children":
                cache = ChildrenCache(watcher, path)
            else:
                cache = ServiceCache(_Base(watcher, "/svc"), path.rsplit("/", 1)[1])
            caches.append(cache.start())
            checks.append(_checks(kind, cache, writer, path))
    try:
        for cache in caches:
            assert cache.wait_initialized(10)

        def everyone_follows(round_: int) -> None:
            for change in changes:
                change(round_)
            for check, (index, kind) in zip(
                checks, [(i, k) for i, pair in enumerate(PAIRS) for k in pair], strict=True
            ):
                wait_until(check, f"the {kind} cache of pair {index} {PAIRS[index]}", timeout=10)

        everyone_follows(1)
        proxied.cut()
        proxied.heal()
        everyone_follows(2)
        expire_session(watcher, hosts=zk_hosts)
        everyone_follows(3)
    finally:
        for cache in caches:
            cache.close()
        registrar.close()
