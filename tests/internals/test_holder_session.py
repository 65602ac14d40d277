"""The house rule for every recipe that holds a node: its writes go out on the holder's session.

A lock's, a lease's and a latch's nodes have unique names, so a delete by
path could not hit another holder's node; a queue claim and a registered
instance have fixed paths, where it could (tests/queue/test_claims.py,
tests/discovery/test_discovery_faults.py). One rule for all: once the
session that made the node is not the client's any more, nothing is written
as its holder. Here the client gives its session up (the server still holds
it, as after a simulated expiry): releasing sends no delete from the new
session, and the node goes when the old session ends on the server.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from zk_recipes import LeaderLatch, Lock, Semaphore, ZkClient
from zk_recipes.testing import expire_session_locally, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def _lock(client: ZkClient) -> tuple[str, Callable[[], None]]:
    lock = Lock(client, "/hs/lock")
    lock.acquire(timeout=10)
    node = lock.node
    assert node is not None
    return node, lock.release


def _lease(client: ZkClient) -> tuple[str, Callable[[], None]]:
    [lease] = Semaphore(client, "/hs/semaphore", max_leases=2).acquire_leases(timeout=10)
    return lease.path, lease.close


def _latch(client: ZkClient) -> tuple[str, Callable[[], None]]:
    latch = LeaderLatch(client, "/hs/latch")
    latch.start()
    assert latch.await_leadership(10)
    node = latch.statistics().node
    assert node is not None
    return node, latch.close


@pytest.mark.parametrize("hold", [_lock, _lease, _latch], ids=["lock", "lease", "latch"])
def test_a_release_after_the_session_was_given_up_writes_nothing_as_its_holder(
    zk_client_factory: ClientFactory, hold: Callable[[ZkClient], tuple[str, Callable[[], None]]]
) -> None:
    client = zk_client_factory(session_timeout=3.0)
    observer = zk_client_factory()
    node, release = hold(client)
    old = expire_session_locally(client)  # the client moves on; the server keeps the session
    release()
    stat = observer.exists(node)
    assert stat is not None  # not deleted from the new session
    assert stat.ephemeral_owner == old
    assert client.pending_deletes() == []  # nor left to try later
    wait_until(lambda: observer.exists(node) is None, "gone with its session", timeout=15)
