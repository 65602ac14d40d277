"""TreeCache on a real server: events in order, the root coming and going, exact after cuts.

The cache is compared with the server read directly (``_server_tree``): the
same paths, data and stats' ``czxid``/``mzxid``. Events are compared as
(type, path) lists, in the order the listener got them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from zk_recipes import (
    CacheEvent,
    CacheEventType,
    CacheOverflowError,
    ConfigurationError,
    NoNodeError,
    RecipeUsageError,
    TreeCache,
    ZkClient,
)
from zk_recipes.testing import Recorder, TcpProxy, ZooKeeperServer, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

CREATED, CHANGED, DELETED = CacheEventType.CREATED, CacheEventType.CHANGED, CacheEventType.DELETED
INITIALIZED, RESYNCED = CacheEventType.INITIALIZED, CacheEventType.RESYNCED


def _server_tree(client: ZkClient, root: str) -> dict[str, tuple[bytes, int, int]]:
    """Every node under ``root`` as the server has it: path -> (data, czxid, mzxid)."""
    found: dict[str, tuple[bytes, int, int]] = {}

    def visit(path: str) -> None:
        try:
            data, stat = client.get(path)
            names = client.get_children(path)
        except NoNodeError:
            return
        found[path] = (data, stat.czxid, stat.mzxid)
        for name in names:
            visit(f"{path.rstrip('/')}/{name}")

    visit(root)
    return found


def _cached(cache: TreeCache) -> dict[str, tuple[bytes, int, int]]:
    return {
        path: (node.data or b"", node.stat.czxid, node.stat.mzxid)
        for path, node in cache.current().items()
    }


def _node_events(events: Recorder[CacheEvent], after: int = 0) -> list[tuple[str, str | None]]:
    return [
        (event.type.value, event.path)
        for event in events.snapshot()[after:]
        if event.type in (CREATED, CHANGED, DELETED, INITIALIZED, RESYNCED)
    ]


@pytest.fixture
def started() -> Iterator[list[TreeCache]]:
    caches: list[TreeCache] = []
    yield caches
    for cache in caches:
        cache.close()


def _cache(
    client: ZkClient, path: str, started: list[TreeCache], **options: object
) -> tuple[TreeCache, Recorder[CacheEvent]]:
    cache = TreeCache(client, path, **options)  # type: ignore[arg-type]
    events = Recorder[CacheEvent]()
    cache.listen(events)
    started.append(cache.start())
    return cache, events


def test_the_first_load_then_every_change_in_order_in_a_three_level_tree(
    zk_client_factory: ClientFactory, started: list[TreeCache]
) -> None:
    writer = zk_client_factory()
    writer.create("/t/a/x", b"1", parents=True)
    writer.create("/t/b", b"2")
    cache, events = _cache(zk_client_factory(), "/t", started)
    assert cache.wait_initialized(10)
    first = _node_events(events)
    assert first[-1] == ("INITIALIZED", None)
    assert sorted(first[:-1]) == sorted(
        [("CREATED", "/t"), ("CREATED", "/t/a"), ("CREATED", "/t/a/x"), ("CREATED", "/t/b")]
    )
    mark = events.mark()
    writer.create("/t/a/y", b"3")
    writer.set("/t/a/x", b"4")
    writer.create("/t/a/y/z")
    # A node made and deleted before its read comes back leaves no event at all (each
    # change is a read): wait for it to be seen before deleting it.
    events.wait_for(lambda e: e.type is CREATED and e.path == "/t/a/y/z", after=mark)
    writer.delete("/t/a/y/z")
    writer.delete("/t/b")
    events.wait_for(lambda e: e.type is DELETED and e.path == "/t/b", after=mark)
    assert _node_events(events, mark) == [
        ("CREATED", "/t/a/y"),
        ("CHANGED", "/t/a/x"),
        ("CREATED", "/t/a/y/z"),
        ("DELETED", "/t/a/y/z"),
        ("DELETED", "/t/b"),
    ]
    assert _cached(cache) == _server_tree(writer, "/t")
    assert cache.children("/t/a") == ["x", "y"]
    changed = next(e for e in events.snapshot() if e.type is CHANGED)
    assert changed.old is not None
    assert changed.old.data == b"1"
    assert changed.node is not None
    assert changed.node.data == b"4"


def test_a_missing_root_is_waited_for_never_created_and_followed_when_remade(
    zk_client_factory: ClientFactory, started: list[TreeCache]
) -> None:
    writer = zk_client_factory()
    cache, events = _cache(zk_client_factory(), "/later", started)
    assert cache.wait_initialized(10)
    assert cache.current() == {}
    assert writer.exists("/later") is None, "the cache created its root"
    writer.create("/later/child", parents=True)
    events.wait_for(lambda e: e.type is CREATED and e.path == "/later/child")
    writer.delete("/later", recursive=True)
    events.wait_for(lambda e: e.type is DELETED and e.path == "/later")
    assert cache.current() == {}
    writer.create("/later", b"again")
    node = events.wait_for(lambda e: e.type is CREATED and e.path == "/later", count=2).node
    assert node is not None
    assert node.data == b"again"


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def test_after_a_cut_the_cache_equals_the_server_and_the_events_are_the_differences(
    zk_client_factory: ClientFactory, proxied: TcpProxy, started: list[TreeCache]
) -> None:
    writer = zk_client_factory()
    for group in ("keep", "change", "gone"):
        for index in range(20):
            writer.create(f"/cut/{group}/n{index}", b"0", parents=True)
    watcher = zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0)
    cache, events = _cache(watcher, "/cut", started)
    assert cache.wait_initialized(20)
    gone_czxid = cache.get("/cut/gone")
    assert gone_czxid is not None
    mark = events.mark()
    proxied.blackhole()
    cut_at = time.monotonic()
    # While away: a subtree deleted and made again, 20 nodes changed, 20 created.
    writer.delete("/cut/gone", recursive=True)
    writer.create("/cut/gone")
    for index in range(20):
        writer.set(f"/cut/change/n{index}", b"1")
        writer.create(f"/cut/new/n{index}", parents=True)
    time.sleep(max(0.0, 2.5 - (time.monotonic() - cut_at)))  # the 2.5 s cut
    proxied.heal()
    events.wait_for(lambda e: e.type is RESYNCED, after=mark, timeout=30)
    assert _cached(cache) == _server_tree(writer, "/cut")
    got = sorted(_node_events(events, mark))
    expected = sorted(
        [("DELETED", f"/cut/gone/n{i}") for i in range(20)]
        + [("DELETED", "/cut/gone"), ("CREATED", "/cut/gone")]
        + [("CHANGED", f"/cut/change/n{i}") for i in range(20)]
        + [("CREATED", f"/cut/new/n{i}") for i in range(20)]
        + [("CREATED", "/cut/new"), ("RESYNCED", None)]
    )
    assert got == expected
    # The re-created node is told apart by its czxid: DELETED before CREATED.
    order = [(t, p) for t, p in _node_events(events, mark) if p == "/cut/gone"]
    assert order == [("DELETED", "/cut/gone"), ("CREATED", "/cut/gone")]
    resynced = [e for e in events.snapshot()[mark:] if e.type is RESYNCED]
    assert resynced[-1].incremental  # the same session: the server's diff, not a walk


def test_a_reconnect_on_the_same_session_reads_only_what_changed(
    zk_client_factory: ClientFactory, proxied: TcpProxy, started: list[TreeCache]
) -> None:
    writer = zk_client_factory()
    for group in range(10):
        for index in range(30):
            writer.create(f"/few/d{group}/n{index}", b"0", parents=True)
    watcher = zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0)
    cache, events = _cache(watcher, "/few", started)
    assert cache.wait_initialized(20)
    loaded = events.wait_for(lambda e: e.type is INITIALIZED, timeout=1)
    assert loaded.requests is not None
    assert loaded.requests > 311
    mark = events.mark()
    proxied.blackhole()
    writer.set("/few/d1/n1", b"1")
    writer.delete("/few/d2/n2")
    writer.create("/few/d3/n3/deep", b"new")  # below a leaf: its parent's pzxid tells
    proxied.heal()
    resynced = events.wait_for(lambda e: e.type is RESYNCED, after=mark, timeout=30)
    assert _cached(cache) == _server_tree(writer, "/few")
    assert sorted(_node_events(events, mark)) == [
        ("CHANGED", "/few/d1/n1"),
        ("CREATED", "/few/d3/n3/deep"),
        ("DELETED", "/few/d2/n2"),
        ("RESYNCED", None),
    ]
    assert resynced.incremental
    # One setWatches2, the root and its children, the two nodes flagged, the two
    # directories whose children changed and the new node: 8, where a walk takes 322.
    assert resynced.requests is not None
    assert resynced.requests <= 10


def test_after_the_session_expires_the_cache_is_rebuilt_and_says_resynced(
    zk_client_factory: ClientFactory, zk_hosts: str, started: list[TreeCache]
) -> None:
    writer = zk_client_factory()
    writer.create("/exp/a", b"1", parents=True)
    watcher = zk_client_factory()
    cache, events = _cache(watcher, "/exp", started)
    assert cache.wait_initialized(10)
    mark = events.mark()
    expire_session(watcher, hosts=zk_hosts)
    writer.set("/exp/a", b"2")
    events.wait_for(lambda e: e.type is RESYNCED, after=mark, timeout=30)
    wait_until(lambda: _cached(cache) == _server_tree(writer, "/exp"), "equal", timeout=10)
    node = cache.get("/exp/a")
    assert node is not None
    assert node.data == b"2"
    resynced = [e for e in events.snapshot()[mark:] if e.type is RESYNCED]
    assert not resynced[-1].incremental  # a new session has nothing to diff against


def test_max_depth_and_a_selector_bound_what_is_cached(
    zk_client_factory: ClientFactory, started: list[TreeCache]
) -> None:
    writer = zk_client_factory()
    for path in ("/d/a/b/c", "/d/skip/x"):
        writer.create(path, parents=True)
    shallow, _ = _cache(zk_client_factory(), "/d", started, max_depth=1)
    picky, _ = _cache(
        zk_client_factory(), "/d", started, selector=lambda path: not path.endswith("/skip")
    )
    assert shallow.wait_initialized(10)
    assert picky.wait_initialized(10)
    assert sorted(shallow.current()) == ["/d", "/d/a", "/d/skip"]
    assert sorted(picky.current()) == ["/d", "/d/a", "/d/a/b", "/d/a/b/c"]
    writer.create("/d/a/b/c/deeper")
    writer.create("/d/skip/y")
    writer.create("/d/z")
    wait_until(lambda: "/d/z" in shallow.current(), "a new child seen", timeout=10)
    wait_until(lambda: "/d/a/b/c/deeper" in picky.current(), "a deep node seen", timeout=10)
    assert "/d/a/b/c/deeper" not in shallow.current()
    assert "/d/skip/y" not in picky.current()


def test_max_nodes_stops_the_cache_ends_the_waits_and_tells_the_listeners(
    zk_client_factory: ClientFactory, started: list[TreeCache]
) -> None:
    writer = zk_client_factory()
    for index in range(5):
        writer.create(f"/cap/n{index}", parents=True)
    cache, events = _cache(zk_client_factory(), "/cap", started, max_nodes=3)
    # The wait ends with the error as the cache stops, not at its timeout with False.
    with pytest.raises(CacheOverflowError, match="max_nodes=3"):
        cache.wait_initialized(20)
    failed = events.wait_for(lambda e: e.type is CacheEventType.FAILED)
    assert isinstance(failed.error, CacheOverflowError)
    assert events.snapshot()[-1] is failed  # the last event
    with pytest.raises(CacheOverflowError):
        cache.wait_synced(0)
    with pytest.raises(CacheOverflowError, match="max_nodes=3"):
        cache.get("/cap")


def test_bad_input_and_misuse(zk_client: ZkClient, started: list[TreeCache]) -> None:
    with pytest.raises(ConfigurationError):
        TreeCache(zk_client, "relative")
    with pytest.raises(ConfigurationError):
        TreeCache(zk_client, "/x", max_depth=-1)
    idle = TreeCache(zk_client, "/m")
    for read in (idle.current, lambda: idle.get("/m"), lambda: idle.wait_initialized(0)):
        with pytest.raises(RecipeUsageError, match=r"not started: call start\(\)"):
            read()
    cache, _ = _cache(zk_client, "/m", started)
    assert cache.wait_initialized(10)
    for outside in ("/", "/other", "/mm", "/m2/x"):
        with pytest.raises(ConfigurationError, match="not under the TreeCache's path /m"):
            cache.get(outside)
        with pytest.raises(ValueError, match="/m"):  # a ConfigurationError is a ValueError
            cache.children(outside)
    assert cache.get("/m/absent") is None
    with pytest.raises(RecipeUsageError):
        cache.start()
    cache.close()
    cache.close()  # twice is fine
    with pytest.raises(RecipeUsageError, match="closed"):
        cache.start()


def test_close_while_loading_and_a_listener_that_raises(
    zk_client_factory: ClientFactory, started: list[TreeCache]
) -> None:
    writer = zk_client_factory()
    for index in range(200):
        writer.create(f"/busy/n{index}", parents=True)
    loading = TreeCache(zk_client_factory(), "/busy").start()
    loading.close()  # while loading: ends, nothing raised
    cache = TreeCache(zk_client_factory(), "/busy")
    events = Recorder[CacheEvent]()

    def bad(event: CacheEvent) -> None:
        raise RuntimeError("a listener bug")

    cache.listen(bad)
    cache.listen(events)
    started.append(cache.start())
    events.wait_for(lambda e: e.type is INITIALIZED)
    assert len(cache.current()) == 201
