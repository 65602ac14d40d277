"""Proof that the quorum heard us, not a follower: a holder on a follower cut from the quorum.

A follower cut off from the leader keeps answering its clients' pings and
reads until it notices, ``syncLimit * tickTime`` later, while the leader stops
hearing of their sessions at the cut and expires them one session timeout
after. A reply from such a follower proves nothing about the leader, so the
client counts only replies that went through the leader (writes, and a sync
it sends when it has written nothing lately), and a holder learns of its loss
before anyone else can take what it held.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from zk_recipes import ErrorPolicy, LeaderLatch, Lock, LockLost, ZkClient
from zk_recipes.testing import ZooKeeperCluster

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

SESSION = 4.0
#: Ticks of 0.2 s before a follower notices it lost the leader: 4 s, the session
#: timeout, as ZooKeeper's sample config (tickTime 2 s, syncLimit 5) is for 10 s sessions.
SYNC_LIMIT = 20


@pytest.fixture(scope="module")
def cluster() -> Iterator[ZooKeeperCluster]:
    with ZooKeeperCluster(size=3, sync_limit=SYNC_LIMIT, quorum_proxies=True) as ensemble:
        yield ensemble


def _client(hosts: str, namespace: str) -> ZkClient:
    return ZkClient(
        hosts, namespace=namespace, session_timeout=SESSION, connection_timeout=30.0
    ).start()


def test_a_holder_on_a_follower_cut_from_the_quorum_knows_first(
    cluster: ZooKeeperCluster,
) -> None:
    leader = cluster.wait_for_quorum()
    follower = next(member for member in cluster.servers if member is not leader)
    quorum = ",".join(m.connect_string for m in cluster.servers if m is not follower)
    namespace = f"/quorum-{uuid.uuid4().hex[:8]}"
    holder = _client(follower.connect_string, namespace)
    rival = _client(quorum, namespace)
    try:
        lock = Lock(holder, "/lock")
        assert lock.acquire(timeout=10)
        standard = LeaderLatch(holder, "/standard", "A").start()
        session = LeaderLatch(holder, "/session", "A", error_policy=ErrorPolicy.SESSION).start()
        assert standard.await_leadership(10)
        assert session.await_leadership(10)
        theirs = Lock(rival, "/lock")
        their_standard = LeaderLatch(rival, "/standard", "B").start()
        their_session = LeaderLatch(rival, "/session", "B").start()
        time.sleep(2 * SESSION / 6)  # idle for a while, as a holder usually is
        seen: dict[str, object] = {}
        got = threading.Event()

        def take() -> None:
            if theirs.acquire(timeout=30):
                try:
                    lock.check()
                    seen["check()"] = "passes"
                except LockLost:
                    seen["check()"] = "raises LockLost"
                seen["is_held()"] = lock.is_held()
                got.set()

        cluster.isolate(follower)
        thread = threading.Thread(target=take)
        thread.start()
        assert got.wait(30), "the rival never got the lock"
        thread.join()
        # The quorum gave the lock away: the holder must know it already.
        assert seen == {"check()": "raises LockLost", "is_held()": False}
        assert their_standard.await_leadership(30)
        assert not standard.has_leadership()
        assert their_session.await_leadership(30)
        assert not session.has_leadership()
        for latch in (standard, session, their_standard, their_session):
            latch.close()
        theirs.release()
    finally:
        cluster.heal_quorum()
        for client in (holder, rival):
            with contextlib.suppress(Exception):
                client.close()
        cluster.wait_for_quorum(60)
