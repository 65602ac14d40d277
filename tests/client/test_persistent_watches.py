"""Persistent watches: addWatch on the wire, routed without popping, back after every reconnect.

Against real servers: what each mode delivers (the note's table, section 2.2),
CHILD to PERSISTENT watchers only, a recursive watch on ``/`` with and
without a namespace, removal (ZooKeeper 3.8 knows no persistent watcher
type: ANY, and only when nothing else shares the path), re-establishment
after a cut connection and after session expiry, the one-shot clash of
3.6-3.8 refused, and a server without persistent watches.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from zk_recipes import (
    PersistentWatch,
    RecipeUsageError,
    UnsupportedFeatureError,
    WatchEvent,
    WatchEventType,
    ZkClient,
)
from zk_recipes.testing import (
    DEFAULT_JVM_OPTIONS,
    Recorder,
    TcpProxy,
    ZooKeeperServer,
    expire_session,
)
from zk_recipes.testing.pytest_plugin import ClientFactory

CREATED, CHANGED, DELETED, CHILD = (
    WatchEventType.CREATED,
    WatchEventType.CHANGED,
    WatchEventType.DELETED,
    WatchEventType.CHILD,
)


def _pairs(events: Recorder[WatchEvent]) -> list[tuple[WatchEventType, str | None]]:
    return [(event.type, event.path) for event in events.snapshot()]


def _settle(client: ZkClient) -> None:
    """A write's reply comes after the notifications of every earlier change (one connection)."""
    client.sync("/")


def test_a_recursive_watch_sees_every_change_below_it_in_order(
    zk_client_factory: ClientFactory,
) -> None:
    watcher, writer = zk_client_factory(), zk_client_factory()
    events = Recorder[WatchEvent]()
    watch = watcher.add_watch("/tree", events)  # the path need not exist yet
    writer.create("/tree")
    writer.create("/tree/a")
    writer.create("/tree/a/b", b"1")
    writer.set("/tree/a/b", b"2")
    writer.delete("/tree/a/b")
    writer.create("/elsewhere")
    events.wait_for(lambda e: e.type is DELETED and e.path == "/tree/a/b")
    _settle(watcher)
    assert _pairs(events) == [
        (CREATED, "/tree"),
        (CREATED, "/tree/a"),
        (CREATED, "/tree/a/b"),
        (CHANGED, "/tree/a/b"),
        (DELETED, "/tree/a/b"),
    ]
    assert watch.recursive
    assert watch.establishments == 1
    watch.remove()


def test_a_persistent_watch_sees_its_node_and_its_children_changing_not_deeper(
    zk_client_factory: ClientFactory,
) -> None:
    watcher, writer = zk_client_factory(), zk_client_factory()
    events = Recorder[WatchEvent]()
    watcher.add_watch("/node", events, recursive=False)
    writer.create("/node")
    writer.create("/node/child")
    writer.create("/node/child/grandchild")
    writer.set("/node", b"x")
    writer.delete("/node/child/grandchild")
    writer.delete("/node/child")
    writer.delete("/node")
    events.wait_for(lambda e: e.type is DELETED and e.path == "/node")
    _settle(watcher)
    assert _pairs(events) == [
        (CREATED, "/node"),
        (CHILD, "/node"),
        (CHANGED, "/node"),
        (CHILD, "/node"),
        (DELETED, "/node"),
    ]


def test_child_events_go_to_persistent_watchers_only_and_one_frame_reaches_every_match(
    zk_client_factory: ClientFactory,
) -> None:
    watcher, writer = zk_client_factory(), zk_client_factory()
    deep, exact = Recorder[WatchEvent](), Recorder[WatchEvent]()
    writer.create("/a")
    watcher.add_watch("/", deep)  # the namespace's root: every node of the test
    watcher.add_watch("/a", exact, recursive=False)
    writer.create("/a/x")
    writer.set("/a", b"1")
    exact.wait_for(lambda e: e.type is CHANGED)
    deep.wait_for(lambda e: e.type is CHANGED and e.path == "/a")
    _settle(watcher)
    # The server sends one notification per change: both watchers get the data change;
    # the CHILD of /a goes to the persistent watch only, never to the recursive one.
    assert _pairs(deep) == [(CREATED, "/a/x"), (CHANGED, "/a")]
    assert _pairs(exact) == [(CHILD, "/a"), (CHANGED, "/a")]


def test_a_recursive_watch_on_the_servers_root_without_a_namespace(
    zk_client_factory: ClientFactory, zk_namespace: str
) -> None:
    watcher = zk_client_factory(namespace=None)
    writer = zk_client_factory()
    events = Recorder[WatchEvent]()
    watch = watcher.add_watch("/", events)
    try:
        writer.create("/root-watch")
        expected = f"{zk_namespace}/root-watch"
        events.wait_for(lambda e: e.type is CREATED and e.path == expected)
    finally:
        watch.remove()


def test_removed_watches_hear_nothing_and_leave_the_other_watches_of_the_path(
    zk_client_factory: ClientFactory,
) -> None:
    watcher, writer = zk_client_factory(), zk_client_factory()
    first, second = Recorder[WatchEvent](), Recorder[WatchEvent]()
    one = watcher.add_watch("/r", first)
    two = watcher.add_watch("/r", second)
    writer.create("/r")
    first.wait_for(lambda e: e.type is CREATED)
    second.wait_for(lambda e: e.type is CREATED)
    one.remove()
    one.remove()  # idempotent
    writer.set("/r", b"1")
    second.wait_for(lambda e: e.type is CHANGED)
    two.remove()
    # A one-shot watch on the path survives the removal of the last persistent one.
    woke = threading.Event()
    watcher.exists("/r", watch=lambda event: woke.set())
    writer.set("/r", b"2")
    assert woke.wait(10), "the removal took the one-shot watch with it"
    writer.create("/r/after")
    _settle(watcher)
    assert _pairs(first) == [(CREATED, "/r")]
    assert _pairs(second) == [(CREATED, "/r"), (CHANGED, "/r")]
    assert one.removed
    assert two.removed


def test_a_one_shot_watch_on_the_exact_path_is_refused_while_the_watch_lives(
    zk_client: ZkClient,
) -> None:
    zk_client.create("/clash")
    watch = zk_client.add_watch("/clash", lambda event: None)
    with pytest.raises(RecipeUsageError, match="keep one watch mode per path"):
        zk_client.get("/clash", watch=lambda event: None)
    with pytest.raises(RecipeUsageError):
        zk_client.exists_async("/clash", watch=lambda event: None)
    zk_client.get("/clash")  # a read without a watch is fine
    zk_client.create("/clash/below")
    zk_client.get("/clash/below", watch=lambda event: None)  # another path is fine
    watch.remove()
    zk_client.get("/clash", watch=lambda event: None)


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def test_a_cut_connection_gets_the_watch_back_and_says_so(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    watcher = zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0)
    writer = zk_client_factory()
    events = Recorder[WatchEvent]()
    established = Recorder[PersistentWatch]()
    watch = watcher.add_watch("/cut", events, on_established=established)
    established.wait_for(lambda w: w is watch)
    proxied.cut()
    writer.create("/cut")  # while away: no event (the server re-adds with no catch-up)
    proxied.heal()
    established.wait_for(lambda w: w is watch, count=2, timeout=20)
    writer.create("/cut/after")
    events.wait_for(lambda e: e.path == "/cut/after")
    assert (CREATED, "/cut") not in _pairs(events)
    assert watch.establishments == 2


def test_changed_since_is_the_servers_diff_of_what_changed_while_away(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    writer = zk_client_factory()
    for name in ("same", "set", "gone", "dir", "kept"):
        writer.create(f"/diff/{name}", parents=True)
    watcher = zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0)
    events = Recorder[WatchEvent]()
    established = Recorder[PersistentWatch]()
    watch = watcher.add_watch("/diff", events, on_established=established)
    established.wait_for(lambda w: w is watch)
    watcher.add_watch("/diff/kept", lambda event: None, recursive=False)
    generation = watcher.connection_generation
    proxied.blackhole()
    writer.set("/diff/set", b"1")
    writer.delete("/diff/gone")
    writer.create("/diff/dir/new")
    proxied.heal()
    established.wait_for(lambda w: w is watch, count=2, timeout=20)
    since = watcher.resumed_since(generation)
    assert since is not None
    assert since > 0
    assert watcher.connection_generation == generation + 1
    mark = events.mark()
    children = Recorder[WatchEvent]()
    paths = ["/diff/same", "/diff/set", "/diff/gone", "/diff/dir", "/diff/kept"]
    sent, left_out = watcher.changed_since(since, paths, paths, children)
    assert (sent, left_out) == (1, ["/diff/kept"])  # a one-shot watch there would replace it
    # Every catch-up event came before the reply (callbacks run on kazoo's thread, after).
    events.wait_for(lambda e: e.path == "/diff/gone", after=mark)
    children.wait_for(lambda e: e.path == "/diff/dir")
    _settle(watcher)
    flagged = {(e.type.value, e.path) for e in events.snapshot()[mark:]}
    assert flagged == {("CHANGED", "/diff/set"), ("DELETED", "/diff/gone")}
    assert _pairs(children) == [(CHILD, "/diff/dir")]
    # An expired session has nothing to diff against.
    assert watcher.resumed_since(generation + 5) is None


def test_a_new_session_after_expiry_gets_the_watch_back(
    zk_client_factory: ClientFactory, zk_hosts: str
) -> None:
    watcher = zk_client_factory()
    writer = zk_client_factory()
    events = Recorder[WatchEvent]()
    established = Recorder[PersistentWatch]()
    watch = watcher.add_watch("/expiry", events, on_established=established)
    established.wait_for(lambda w: w is watch)
    before = watcher.session_id
    expire_session(watcher, hosts=zk_hosts)
    established.wait_for(lambda w: w is watch, count=2, timeout=30)
    assert watcher.session_id != before
    writer.create("/expiry")
    events.wait_for(lambda e: e.type is CREATED and e.path == "/expiry")


def test_a_server_without_persistent_watches_refuses_them_clearly() -> None:
    optimized = "org.apache.zookeeper.server.watch.WatchManagerOptimized"
    options = (*DEFAULT_JVM_OPTIONS, f"-Dzookeeper.watchManagerName={optimized}")
    with ZooKeeperServer(jvm_options=options) as server:
        client = ZkClient(server.connect_string)
        client.start()
        try:
            with pytest.raises(UnsupportedFeatureError, match="WatchManagerOptimized"):
                client.add_watch("/x", lambda event: None)
            # Nothing was kept: a one-shot watch on the path is allowed.
            client.exists("/x", watch=lambda event: None)
        finally:
            client.close()
