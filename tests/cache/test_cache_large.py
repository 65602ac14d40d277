"""A 20,000-node tree: loaded, then a burst of 4,000 changes, and the cache equals the server.

Big enough that the walk's reads are paged (256 at a time: the server
throttles more) and a burst arrives while pages are in flight; the cost at
100,000 and 1,000,000 nodes is the benchmarks' (benchmarks/caches.py,
benchmarks/scale.py), not the suite's (100,000 here took 100 s of the 2-core
box's CPU on every run). The tree is made with pipelined creates by a raw
client; the comparison reads the server's tree back the same way (one get per
node, one get_children per directory).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from zk_recipes import TreeCache, ZkClient
from zk_recipes.testing.pytest_plugin import ClientFactory

DIRS, PER_DIR = 20, 1000  # 20,000 leaves
CHANGES = 4_000


def _pipelined(calls: list[Any]) -> list[Any]:
    return [call.result(60) for call in calls]


def _server_tree(client: ZkClient, root: str) -> dict[str, int]:
    """path -> mzxid of every node under ``root``, read with pipelined requests."""
    found = {root: client.get(root)[1].mzxid}
    dirs = sorted(client.get_children(root))
    listings = _pipelined([client.get_children_async(f"{root}/{d}") for d in dirs])
    paths = [f"{root}/{d}" for d in dirs]
    for directory, names in zip(dirs, listings, strict=True):
        paths.extend(f"{root}/{directory}/{name}" for name in names)
    for start in range(0, len(paths), 5000):
        batch = paths[start : start + 5000]
        stats = _pipelined([client.get_async(p) for p in batch])
        found.update({p: stat.mzxid for p, (_data, stat) in zip(batch, stats, strict=True)})
    return found


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_twenty_thousand_nodes_then_four_thousand_changes(
    zk_client_factory: ClientFactory,
) -> None:
    # 10 s sessions: a load test, not a fault test; 100,000 pipelined writes on a busy
    # 2-core box kept a 3 s session unanswered long enough to be declared lost.
    writer = zk_client_factory(session_timeout=10.0)
    writer.create("/big")
    _pipelined([writer.create_async(f"/big/d{d:03d}") for d in range(DIRS)])
    for d in range(DIRS):
        _pipelined([writer.create_async(f"/big/d{d:03d}/n{n:04d}", b"v0") for n in range(PER_DIR)])
    with TreeCache(zk_client_factory(session_timeout=10.0), "/big") as cache:
        assert cache.wait_initialized(240)
        assert len(cache.current()) == 1 + DIRS + DIRS * PER_DIR
        for start in range(0, CHANGES, 2000):
            _pipelined(
                [
                    writer.set_async(f"/big/d{i % DIRS:03d}/n{i // DIRS:04d}", b"v1")
                    for i in range(start, start + 2000)
                ]
            )
        server = _server_tree(writer, "/big")
        deadline = time.monotonic() + 120
        while {p: n.stat.mzxid for p, n in cache.current().items()} != server:
            assert time.monotonic() < deadline, "the cache never caught up with the burst"
            time.sleep(0.2)
    # Pipelined deletes: the namespace's clean-up deletes one node at a time.
    for d in range(DIRS):
        _pipelined([writer.delete_async(f"/big/d{d:03d}/n{n:04d}") for n in range(PER_DIR)])
    _pipelined([writer.delete_async(f"/big/d{d:03d}") for d in range(DIRS)])
