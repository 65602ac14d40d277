"""Our Lock/RLock and Curator 5.4's InterProcessMutex on one path: exclusion and FIFO both ways."""

from __future__ import annotations

import threading
import time

from zk_recipes import Lock, RLock, ZkClient
from zk_recipes.testing import wait_for_children
from zk_recipes.testing.pytest_plugin import ClientFactory

from .curator import PeerFactory


def _queue_length(client: ZkClient, path: str) -> int:
    return len(client.get_children(path)) if client.exists(path) else 0


def test_curator_holder_excludes_our_lock_and_hands_over(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    client = zk_client_factory()
    peer.call(f"mutex m {zk_namespace}/shared")
    held = peer.call("acquire m 5000", timeout=15)
    assert held.startswith("acquired ")
    lock = Lock(client, "/shared")
    assert not lock.acquire(blocking=False)
    assert not lock.acquire(timeout=0.5)
    assert _queue_length(client, "/shared") == 1  # our timed-out node is gone
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(lock.acquire(timeout=15)))
    waiter.start()
    wait_for_children(client, "/shared", lambda c: len(c) >= 2)
    assert not result
    peer.call("release m")
    waiter.join(15)
    assert result == [True]
    assert lock.fencing_token > 0
    # Curator sees our node as the holder.
    participants = peer.call("participants m").split()
    assert participants[0] == f"{zk_namespace}{lock.node}"
    lock.release()


def test_our_holder_excludes_curator_and_hands_over(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    lock = RLock(zk_client_factory(), "/shared")
    assert lock.acquire()
    assert lock.acquire()  # re-entrant: no second node
    peer.call(f"mutex m {zk_namespace}/shared")
    assert peer.call("acquire m 500", timeout=10) == "timeout"
    assert peer.call("acquire m") == "pending"
    lock.release()
    assert peer.poll_event("m acquired .*") is None  # still held once
    lock.release()
    event = peer.wait_event("m acquired .*", timeout=10)
    assert event.startswith("m acquired ")
    peer.call("release m")


def test_fifo_across_languages(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    # Queue: ours (holder) -> Curator -> ours -> Curator; they must run in that order.
    path = "/fifo"
    peer = curator_peer_factory(zk_hosts)
    observer = zk_client_factory()
    holder = Lock(zk_client_factory(), path)
    assert holder.acquire()
    order: list[str] = []
    guard = threading.Lock()

    peer.call(f"mutex j1 {zk_namespace}{path}")
    peer.call(f"mutex j2 {zk_namespace}{path}")
    assert peer.call("acquire j1") == "pending"
    wait_for_children(observer, path, lambda c: len(c) >= 2)

    ours = Lock(zk_client_factory(), path)

    def python_waiter() -> None:
        assert ours.acquire(timeout=30)
        with guard:
            order.append("py")
        time.sleep(0.05)
        ours.release()

    thread = threading.Thread(target=python_waiter)
    thread.start()
    wait_for_children(observer, path, lambda c: len(c) >= 3)
    assert peer.call("acquire j2") == "pending"
    wait_for_children(observer, path, lambda c: len(c) >= 4)

    holder.release()
    peer.wait_event("j1 acquired .*", timeout=10)
    with guard:
        order.append("j1")
    time.sleep(0.1)
    assert order == ["j1"]  # our waiter is behind j1
    peer.call("release j1")
    thread.join(15)
    peer.wait_event("j2 acquired .*", timeout=10)
    with guard:
        order.append("j2")
    peer.call("release j2")
    assert order == ["j1", "py", "j2"]
