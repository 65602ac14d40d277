"""Persistent watches of both modes on one path of one client: one server watch serves them.

ZooKeeper 3.6-3.8 keep one watch mode per (connection, path): a plain
``addWatch`` after a recursive one on the same path makes it non-recursive
(ZOOKEEPER-4466). The client sends a path only the strongest mode any of its
watchers needs and serves the exact watchers from it, making their CHILD
events from the CREATED and DELETED of the path's children unless the
server sends real ones (``zk_recipes._client.kazoo.watches``). Each test
checks every watcher hears every change exactly once, in either order of
adding, after one of them is removed, after a reconnect and after a new
session.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from zk_recipes import PersistentWatch, WatchEvent, WatchEventType, ZkClient
from zk_recipes.testing import Recorder, TcpProxy, ZooKeeperServer, expire_session
from zk_recipes.testing.pytest_plugin import ClientFactory

CREATED, CHANGED, DELETED, CHILD = (
    WatchEventType.CREATED,
    WatchEventType.CHANGED,
    WatchEventType.DELETED,
    WatchEventType.CHILD,
)
Pairs = list[tuple[WatchEventType, str | None]]


def _pairs(events: Recorder[WatchEvent], after: int = 0) -> Pairs:
    return [(event.type, event.path) for event in events.snapshot()[after:]]


def _changes(writer: ZkClient, root: str) -> tuple[Pairs, Pairs]:
    """Change ``root`` and below it; what an exact and a recursive watch of it must hear."""
    writer.create(f"{root}/a")
    writer.create(f"{root}/a/deep", b"1")
    writer.set(root, b"x")
    writer.set(f"{root}/a/deep", b"2")
    writer.delete(f"{root}/a/deep")
    writer.delete(f"{root}/a")
    exact: Pairs = [(CHILD, root), (CHANGED, root), (CHILD, root)]
    deep: Pairs = [
        (CREATED, f"{root}/a"),
        (CREATED, f"{root}/a/deep"),
        (CHANGED, root),
        (CHANGED, f"{root}/a/deep"),
        (DELETED, f"{root}/a/deep"),
        (DELETED, f"{root}/a"),
    ]
    return exact, deep


def _both(
    watcher: ZkClient, path: str, exact_first: bool
) -> tuple[Recorder[WatchEvent], Recorder[WatchEvent], list[PersistentWatch], Recorder[Any]]:
    exact, deep = Recorder[WatchEvent](), Recorder[WatchEvent]()
    established = Recorder[Any]()
    order = [(exact, False), (deep, True)] if exact_first else [(deep, True), (exact, False)]
    watches = [
        watcher.add_watch(path, events, recursive=recursive, on_established=established)
        for events, recursive in order
    ]
    return exact, deep, watches, established


def _hear_once(
    writer: ZkClient,
    watcher: ZkClient,
    root: str,
    exact: Recorder[WatchEvent],
    deep: Recorder[WatchEvent],
) -> None:
    marks = exact.mark(), deep.mark()
    want_exact, want_deep = _changes(writer, root)
    deep.wait_for(lambda e: e.type is DELETED and e.path == f"{root}/a", after=marks[1])
    exact.wait_for(lambda e: e.type is CHILD, count=2, after=marks[0])
    watcher.sync("/")  # its reply comes after every notification of the changes before it
    assert _pairs(deep, marks[1]) == want_deep
    assert _pairs(exact, marks[0]) == want_exact


@pytest.mark.parametrize("exact_first", [True, False], ids=["exact-first", "recursive-first"])
def test_both_modes_on_one_path_hear_every_change_once_in_either_order(
    zk_client_factory: ClientFactory, exact_first: bool
) -> None:
    watcher, writer = zk_client_factory(), zk_client_factory()
    writer.create("/p")
    exact, deep, watches, _ = _both(watcher, "/p", exact_first)
    _hear_once(writer, watcher, "/p", exact, deep)
    for watch in watches:
        watch.remove()


@pytest.mark.parametrize("exact_first", [True, False], ids=["exact-first", "recursive-first"])
def test_removing_one_mode_leaves_the_other_whole_and_narrows_the_servers_watch(
    zk_client_factory: ClientFactory, exact_first: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    watcher, writer = zk_client_factory(), zk_client_factory()
    writer.create("/r")
    exact, deep, watches, _ = _both(watcher, "/r", exact_first)
    by_mode = {w.recursive: w for w in watches}
    by_mode[True].remove()
    watcher.sync("/")  # answered after the addWatch that narrows the server's watch (not waited)
    # Count what the server sends this connection from now on.
    router = watcher._usable()._router
    heard: list[tuple[int, str]] = []
    route = router.route

    def counting(event_type: int, path: str) -> Any:
        heard.append((event_type, path))
        return route(event_type, path)

    monkeypatch.setattr(router, "route", counting)
    marks = exact.mark(), deep.mark()
    want_exact, _ = _changes(writer, "/r")
    exact.wait_for(lambda e: e.type is CHILD, count=2, after=marks[0])
    watcher.sync("/")
    assert _pairs(exact, marks[0]) == want_exact
    assert _pairs(deep, marks[1]) == []
    # The server's watch is PERSISTENT again: nothing below /r reaches this connection.
    assert {path for _, path in heard} == {f"{watcher.namespace}/r"}, heard
    # Removing the exact one too, then a recursive and an exact one again, and the
    # exact one: the recursive one stays whole.
    by_mode[False].remove()
    others = Recorder[WatchEvent]()
    watch = watcher.add_watch("/r", others)
    watcher.add_watch("/r", exact, recursive=False).remove()
    writer.create("/r/b/c", parents=True)
    others.wait_for(lambda e: e.path == "/r/b/c")
    watch.remove()


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


@pytest.mark.parametrize("exact_first", [True, False], ids=["exact-first", "recursive-first"])
def test_both_modes_stay_whole_after_a_reconnect_and_a_new_session(
    zk_client_factory: ClientFactory, proxied: TcpProxy, zk_hosts: str, exact_first: bool
) -> None:
    watcher = zk_client_factory(hosts=proxied.connect_string, session_timeout=4.0)
    writer = zk_client_factory()
    writer.create("/c")
    exact, deep, watches, established = _both(watcher, "/c", exact_first)
    established.wait_for(lambda w: True, count=2)
    proxied.cut()
    proxied.heal()
    established.wait_for(lambda w: True, count=4, timeout=20)
    _hear_once(writer, watcher, "/c", exact, deep)
    before = watcher.session_id
    expire_session(watcher, hosts=zk_hosts)
    established.wait_for(lambda w: True, count=6, timeout=30)
    assert watcher.session_id != before
    _hear_once(writer, watcher, "/c", exact, deep)
    for watch in watches:
        watch.remove()
