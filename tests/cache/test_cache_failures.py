"""A cache when reads fail or the connection is down: never deaf, never stuck, never blocking.

Review 3's C2 (an unreadable node kept a cache from initializing; a read that
timed out on a live connection waited for a reconnect), M5 (the one-shot
watches an incremental resync left outlived ``close()``) and M7 (``close()``
while disconnected waited for the server). Each on a real server: NoAuth
from a digest ACL, a slow reply from a paused server, a partition from a
proxy; the server's own list of watches (``wchc``) says what it keeps.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
from kazoo.protocol.states import KeeperState
from kazoo.security import OPEN_ACL_UNSAFE

from zk_recipes import (
    CacheEvent,
    CacheEventType,
    Perms,
    TreeCache,
    ZkClient,
    digest_acl,
)
from zk_recipes.testing import Recorder, TcpProxy, ZooKeeperServer, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

CREATED, CHANGED, DELETED = CacheEventType.CREATED, CacheEventType.CHANGED, CacheEventType.DELETED
UNREADABLE, RESYNCED = CacheEventType.UNREADABLE, CacheEventType.RESYNCED


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def _started(client: ZkClient, path: str) -> tuple[TreeCache, Recorder[CacheEvent]]:
    cache = TreeCache(client, path)
    events = Recorder[CacheEvent]()
    cache.listen(events)
    cache.start()
    return cache, events


def test_an_unreadable_node_is_skipped_told_once_and_followed_once_readable(
    zk_client_factory: ClientFactory,
) -> None:
    admin = zk_client_factory(auth=(("digest", "admin:pw"),))
    admin.create("/acl/open", b"1", parents=True)
    admin.create("/acl/secret", b"2", acl=(digest_acl("admin", "pw", Perms.ALL),))
    admin.create("/acl/secret/below", b"3")
    cache, events = _started(zk_client_factory(), "/acl")
    try:
        assert cache.wait_initialized(10)  # the walk ended: the node was skipped, not awaited
        assert cache.wait_synced(0)
        assert sorted(cache.current()) == ["/acl", "/acl/open"]
        assert cache.unreadable == {"/acl/secret"}
        told = [e for e in events.snapshot() if e.type is UNREADABLE]
        assert [e.path for e in told] == ["/acl/secret"]
        admin.set("/acl/secret", b"again")  # 3.8.0 tells, the read is refused again
        admin.set("/acl/open", b"changed")
        events.wait_for(lambda e: e.type is CHANGED and e.path == "/acl/open")
        assert len([e for e in events.snapshot() if e.type is UNREADABLE]) == 1  # said once
        # Readable again: at its next change it comes, with what is below it.
        admin.kazoo_client.set_acls(f"{admin.namespace}/acl/secret", OPEN_ACL_UNSAFE)
        admin.set("/acl/secret", b"open")
        events.wait_for(lambda e: e.type is CREATED and e.path == "/acl/secret/below")
        assert sorted(cache.current()) == ["/acl", "/acl/open", "/acl/secret", "/acl/secret/below"]
        assert cache.unreadable == frozenset()
    finally:
        cache.close()


def test_a_read_that_times_out_on_a_live_connection_is_read_again(
    zk_private_server: ZooKeeperServer,
    zk_client_factory: ClientFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    hosts = zk_private_server.connect_string
    watcher = zk_client_factory(hosts=hosts, session_timeout=6.0, connection_timeout=1.0)
    writer = zk_client_factory(hosts=hosts)
    writer.create("/slow/a", b"0", parents=True)
    gate, entered = threading.Event(), threading.Event()

    def hold(event: CacheEvent) -> None:  # holds the cache's worker at its first change
        if event.type is CHANGED and not entered.is_set():
            entered.set()
            gate.wait(30)

    cache, _ = _started(watcher, "/slow")
    cache.listen(hold)
    try:
        assert cache.wait_initialized(10)
        writer.set("/slow/a", b"1")
        assert entered.wait(10)
        writer.set("/slow/a", b"2")
        watcher.sync("/")  # the change's notification is queued in the cache by now
        generation = watcher.connection_generation
        caplog.set_level(logging.WARNING, logger="zk_recipes.cache")
        zk_private_server.pause()
        try:
            gate.set()  # the worker reads /slow/a from a server that does not answer
            wait_until(lambda: "reading it again" in caplog.text, "a retried read", timeout=10)
        finally:
            zk_private_server.resume()
        wait_until(
            lambda: (node := cache.get("/slow/a")) is not None and node.data == b"2",
            "the change",
            timeout=10,
        )
        assert watcher.connection_generation == generation  # one connection throughout
    finally:
        gate.set()
        cache.close()


def test_close_with_a_read_unanswered_ends_the_worker_without_waiting_for_the_server(
    zk_private_server: ZooKeeperServer, zk_client_factory: ClientFactory
) -> None:
    hosts = zk_private_server.connect_string
    watcher = zk_client_factory(hosts=hosts, session_timeout=4.0, connection_timeout=60.0)
    writer = zk_client_factory(hosts=hosts)
    writer.create("/off/a", b"0", parents=True)
    gate, entered = threading.Event(), threading.Event()

    def hold(event: CacheEvent) -> None:
        if event.type is CHANGED and not entered.is_set():
            entered.set()
            gate.wait(30)

    cache, events = _started(watcher, "/off")
    cache.listen(hold)
    kazoo = watcher.kazoo_client
    try:
        assert cache.wait_initialized(10)
        writer.set("/off/a", b"1")
        assert entered.wait(10)
        writer.set("/off/a", b"2")
        watcher.sync("/")
        zk_private_server.pause()
        try:
            gate.set()  # the worker reads /off/a from a server that does not answer
            wait_until(lambda: len(kazoo._pending) > 0, "the read sent", timeout=10)
            mark = events.mark()
            cache.close()
            # Returned before the client gave the connection up (kazoo's state moves
            # before it fails what is pending): close() waited for no reply.
            assert kazoo._state == KeeperState.CONNECTED
        finally:
            zk_private_server.resume()
        thread = cache._engine._thread
        assert thread is not None
        assert not thread.is_alive(), "close() returned with the worker still waiting"
        assert events.snapshot()[mark:] == []
    finally:
        gate.set()
        cache.close()


def _watched_by(server: ZooKeeperServer, session: int) -> set[str]:
    """The paths the server keeps a watch on for ``session`` (the ``wchc`` command), but
    /zookeeper/config: the client's own (it follows the ensemble), no cache's."""
    paths: set[str] = set()
    mine = False
    for line in server.four_letter("wchc").splitlines():
        if line.startswith("0x"):
            mine = int(line, 16) == session
        elif mine and line.strip():
            paths.add(line.strip())
    return paths - {"/zookeeper/config"}


def test_close_takes_back_the_watches_an_incremental_resync_left(
    zk_client_factory: ClientFactory, proxied: TcpProxy, zk_server: ZooKeeperServer
) -> None:
    writer = zk_client_factory()
    for index in range(5):
        writer.create(f"/left/n{index}", b"0", parents=True)
    watcher = zk_client_factory(hosts=proxied.connect_string, session_timeout=4.0)
    cache, events = _started(watcher, "/left")
    assert cache.wait_initialized(10)
    mark = events.mark()
    proxied.cut()
    writer.set("/left/n0", b"1")
    proxied.heal()
    resynced = events.wait_for(lambda e: e.type is RESYNCED, after=mark, timeout=20)
    assert resynced.incremental
    session = watcher.session_id
    left = _watched_by(zk_server, session)
    root = f"{watcher.namespace}/left"
    assert {f"{root}/n{i}" for i in range(1, 5)} <= left  # the unchanged nodes' watches
    woke = threading.Event()
    watcher.exists("/left/n1", watch=lambda event: woke.set())  # another watcher's
    cache.close()
    wait_until(
        lambda: _watched_by(zk_server, session) == {f"{root}/n1"}, "only the other's left", 10
    )
    writer.set("/left/n1", b"1")
    assert woke.wait(10), "close() took another watcher's watch"
