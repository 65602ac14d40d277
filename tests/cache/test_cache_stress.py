"""A short randomized stress of the caches, with a fixed seed: exact at every RESYNCED.

The shape of review 3's ``cache_stress.py``: each round makes a few changes,
cuts the watcher off (or expires its session), makes a burst of changes while
it is away (a node deleted and made again with the same data, a directory
made again with its children, data set and set back, deep creates, deletes),
then heals. Checked each round: at RESYNCED after a cut (nothing changes
after the heal) the TreeCache equals the server exactly (data, czxid,
mzxid); after an expiry it does eventually; the event stream replays to the
cache (CREATED only of an absent path, CHANGED only with the same czxid and
a newer mzxid, DELETED only of a present path); a NodeCache on the same root
of the same client (a plain watch beside the recursive one) follows the
root; a node the watcher may not read stays skipped and the walks still end.
Parents are made PERSISTENT: CONTAINER ones are reaped by the server after
the heal, a change the checker would have to allow for.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cache.test_tree_cache import _cached, _server_tree
from zk_recipes import (
    CacheEvent,
    CacheEventType,
    NodeCache,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Pending,
    Perms,
    TreeCache,
    ZkClient,
    digest_acl,
)
from zk_recipes.testing import Recorder, TcpProxy, ZooKeeperServer, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

CREATED, CHANGED, DELETED = CacheEventType.CREATED, CacheEventType.CHANGED, CacheEventType.DELETED
RESYNCED = CacheEventType.RESYNCED
PATHS = ["/a", "/a/b", "/a/b/c", "/a/d", "/e", "/e/f", "/e/f/g", "/h"]
SEED = 20240611
ROUNDS = 60


class _Replay:
    """Replays the event stream, noting every event that does not fit what it holds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.nodes: dict[str, tuple[int, int]] = {}
        self.errors: list[str] = []
        #: Per path, the lowest czxid a CREATED may show: newer than any node shown
        #: there before, and past one shown DELETED (a cache only moves forward).
        self.made: dict[str, int] = {}

    def __call__(self, event: CacheEvent) -> None:
        with self.lock:
            path, node = event.path, event.node
            if event.type is CREATED and path is not None and node is not None:
                if path in self.nodes:
                    self.errors.append(f"CREATED of a cached path {path}")
                if node.stat.czxid < self.made.get(path, 0):
                    self.errors.append(f"CREATED of {path}: a node shown before, or older")
                self.made[path] = node.stat.czxid
                self.nodes[path] = (node.stat.czxid, node.stat.mzxid)
            elif event.type is CHANGED and path is not None and node is not None:
                was, now = self.nodes.get(path), (node.stat.czxid, node.stat.mzxid)
                if was is None or was[0] != now[0] or now[1] <= was[1]:
                    self.errors.append(f"CHANGED of {path} from {was} to {now}")
                self.nodes[path] = now
            elif event.type is DELETED and path is not None:
                if self.nodes.pop(path, None) is None:
                    self.errors.append(f"DELETED of an absent path {path}")
                if event.old is not None:
                    self.made[path] = event.old.stat.czxid + 1


def _make(writer: ZkClient, path: str, data: bytes) -> None:
    """Create ``path`` with PERSISTENT parents (see the module note)."""
    parts = path.strip("/").split("/")
    for index in range(1, len(parts)):
        with contextlib.suppress(NodeExistsError):
            writer.create("/" + "/".join(parts[:index]))
    writer.create(path, data)


def _change(writer: ZkClient, rng: random.Random, root: str) -> None:
    kind = rng.choice(["create", "create", "set", "delete", "recreate", "recreate_dir", "setback"])
    path = root + rng.choice(PATHS)
    data = rng.choice([b"", b"x", b"y"])
    try:
        if kind == "create":
            _make(writer, path, data)
        elif kind == "set":
            writer.set(path, data)
        elif kind == "setback":
            old, _ = writer.get(path)
            writer.set(path, b"tmp")
            writer.set(path, old)
        elif kind == "delete":
            writer.delete(path, recursive=True)
        elif kind == "recreate":  # the same data, its version back to 0
            old, stat = writer.get(path)
            if stat.num_children == 0:
                writer.delete(path)
                writer.create(path, old)
        else:  # a directory and its children again, with the same data
            before = _server_tree(writer, path)
            writer.delete(path, recursive=True)
            for again in sorted(before, key=lambda p: p.count("/")):
                _make(writer, again, before[again][0])
    except (NoNodeError, NodeExistsError, NotEmptyError):
        pass


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


@pytest.mark.slow
def test_random_changes_while_cut_off_leave_the_caches_exact(
    zk_client_factory: ClientFactory, proxied: TcpProxy, zk_hosts: str
) -> None:
    rng = random.Random(SEED)
    root = "/stress"
    writer = zk_client_factory(auth=(("digest", "admin:pw"),))
    writer.create(root)
    writer.create(f"{root}/secret", b"s", acl=(digest_acl("admin", "pw", Perms.ALL),))
    writer.create(f"{root}/secret/below")
    for _ in range(8):
        _change(writer, rng, root)
    watcher = zk_client_factory(hosts=proxied.connect_string, session_timeout=4.0)
    replay, events = _Replay(), Recorder[CacheEvent]()
    tree = TreeCache(watcher, root)
    tree.listen(replay)
    tree.listen(events)
    node = NodeCache(watcher, root)

    def visible() -> dict[str, tuple[bytes, int, int]]:
        found = _server_tree(writer, root)
        return {p: v for p, v in found.items() if not p.startswith(f"{root}/secret")}

    def root_followed() -> bool:
        got = node.current()
        return got is not None and got.stat.mzxid == writer.get(root)[1].mzxid

    with tree, node:
        assert tree.wait_initialized(20)
        assert node.wait_initialized(20)
        expiries = incremental = 0
        for round_ in range(ROUNDS):
            for _ in range(rng.randint(0, 3)):
                _change(writer, rng, root)
            writer.set(root, str(round_).encode())  # the NodeCache's own change
            mark = events.mark()
            expiring = rng.random() < 0.2
            if expiring:
                assert watcher.wait_connected(20)
                expire_session(watcher, hosts=zk_hosts)
                expiries += 1
            else:
                proxied.cut()
            for _ in range(rng.randint(1, 8)):
                _change(writer, rng, root)
            proxied.heal()
            resynced = events.wait_for(lambda e: e.type is RESYNCED, after=mark, timeout=30)
            incremental += resynced.incremental
            if not expiring:  # nothing changed since the heal: exact now
                assert _cached(tree) == visible(), f"round {round_}: at RESYNCED"
            wait_until(lambda: _cached(tree) == visible(), f"round {round_}: equal", timeout=15)
            wait_until(root_followed, f"round {round_}: the NodeCache", timeout=15)
            with replay.lock:
                assert replay.errors == [], f"round {round_}"
                assert set(replay.nodes) == set(tree.current()), f"round {round_}: replay"
            assert tree.unreadable == {f"{root}/secret"}
    assert expiries > 0
    assert incremental >= ROUNDS - expiries  # every cut healed with the server's diff


def test_deletes_applied_without_a_read_keep_the_stream_in_the_servers_order(
    zk_client_factory: ClientFactory,
) -> None:
    """A DELETED notification is applied without a read, in order with the reads in flight.

    A writer pipelines creates, sets and deletes of a few names (nothing waits
    for the cache), so reads of a name made again are in flight around the
    notification of its delete: a read sent after the delete finds the new
    node, and the delete, stamped before it, must leave that node alone. The
    stream replays to the cache and never shows a node older than one shown
    before at the same path; the cache ends equal to the server.
    """
    rng = random.Random(SEED)
    root = "/pipelined"
    writer = zk_client_factory()
    writer.create(root)
    watcher = zk_client_factory()
    replay = _Replay()
    names = [f"{root}/n{index}" for index in range(4)]
    with TreeCache(watcher, root) as tree:
        tree.listen(replay)
        assert tree.wait_initialized(20)
        sent: list[Pending[Any]] = []
        for _ in range(400):
            path, kind = rng.choice(names), rng.choice(["create", "create", "set", "delete"])
            if kind == "create":
                sent.append(writer.create_async(path, bytes([rng.randrange(256)])))
            elif kind == "set":
                sent.append(writer.set_async(path, bytes([rng.randrange(256)])))
            else:
                sent.append(writer.delete_async(path))
        for pending in sent:
            with contextlib.suppress(NoNodeError, NodeExistsError):
                pending.result(10)
        wait_until(lambda: _cached(tree) == _server_tree(writer, root), "equal", timeout=15)
        with replay.lock:
            assert replay.errors == []
            assert set(replay.nodes) == set(tree.current())
