"""Random operations by another client, with cuts and expiries: then cache == server.

Bounded (a few examples of a few dozen operations) to keep the suite quick;
the seed is in hypothesis's report when one fails.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from tests.cache.test_tree_cache import _cached, _server_tree
from zk_recipes import NodeExistsError, NoNodeError, NotEmptyError, TreeCache, ZkClient
from zk_recipes.testing import TcpProxy, ZooKeeperServer, expire_session

PATHS = ["/a", "/a/b", "/a/b/c", "/a/d", "/e", "/e/f"]
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.sampled_from(PATHS), st.binary(max_size=3)),
        st.tuples(st.just("set"), st.sampled_from(PATHS), st.binary(max_size=3)),
        st.tuples(st.just("delete"), st.sampled_from(PATHS), st.just(b"")),
        st.tuples(st.just("cut"), st.just(""), st.just(b"")),
        st.tuples(st.just("expire"), st.just(""), st.just(b"")),
    ),
    max_size=25,
)
_runs = itertools.count()


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


@settings(
    max_examples=5,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: each run is slow
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS)
def test_after_random_operations_cuts_and_expiries_the_cache_equals_the_server(
    operations: list[tuple[str, str, bytes]],
    zk_namespace: str,
    proxied: TcpProxy,
    zk_server: ZooKeeperServer,
) -> None:
    root = f"/prop{next(_runs)}"
    # Clients closed after each example: the server takes 60 connections from one address.
    with (
        ZkClient(zk_server.connect_string, namespace=zk_namespace) as writer,
        ZkClient(proxied.connect_string, namespace=zk_namespace, session_timeout=4.0) as watcher,
    ):
        run_operations(operations, root, writer, watcher, proxied, zk_server)


def run_operations(
    operations: list[tuple[str, str, bytes]],
    root: str,
    writer: ZkClient,
    watcher: ZkClient,
    proxied: TcpProxy,
    zk_server: ZooKeeperServer,
) -> None:
    with TreeCache(watcher, root) as cache:
        assert cache.wait_initialized(20)
        for kind, path, data in operations:
            full = root + path
            try:
                if kind == "create":
                    writer.create(full, data, parents=True)
                elif kind == "set":
                    writer.set(full, data)
                elif kind == "delete":
                    writer.delete(full, recursive=True)
                elif kind == "cut":
                    proxied.blackhole()
                    time.sleep(0.3)
                    proxied.heal()
                else:
                    assert watcher.wait_connected(20)  # a session to expire
                    expire_session(watcher, hosts=zk_server.connect_string)
            except (NoNodeError, NodeExistsError, NotEmptyError):
                pass

        deadline = time.monotonic() + 30
        while _cached(cache) != (server := _server_tree(writer, root)):
            assert time.monotonic() < deadline, f"cache {_cached(cache)} != server {server}"
            time.sleep(0.05)
        assert cache.wait_synced(30)
