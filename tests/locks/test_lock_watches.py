"""A waiter that stops waiting takes its watch back: nothing is left on the server.

A lock waiter watches its predecessor's node with a one-shot data watch.
When its acquire times out or is cancelled, that watch used to stay on the
server until the predecessor changed, and its callback in kazoo's table: a
process that polls a busy lock with short timeouts piled them up. Now it is
removed (``removeWatches``); another data watch of the same client on that
node, which the server's removal takes too, gets a NONE event and reads again.
"""

from __future__ import annotations

import threading

from zk_recipes import Lock, WatchEvent, WatchEventType, ZkClient
from zk_recipes.testing import Recorder, ZooKeeperServer, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def _watchers_of(server: ZooKeeperServer, path: str) -> set[int]:
    """Sessions with a watch on ``path``, from the server's ``wchp``."""
    found: set[int] = set()
    current = None
    for line in server.four_letter("wchp").splitlines():
        if line.startswith("\t"):
            if current == path:
                found.add(int(line.strip(), 16))
        elif line.strip():
            current = line.strip()
    return found


def _holder_node(holder: Lock) -> str:
    node = holder.node
    assert node is not None
    return node


def test_a_timed_out_waiter_leaves_no_watch_on_the_server(
    zk_client_factory: ClientFactory, zk_server: ZooKeeperServer, zk_namespace: str
) -> None:
    holder = Lock(zk_client_factory(), "/locks/w")
    assert holder.acquire()
    waiter_client = zk_client_factory()
    waiter = Lock(waiter_client, "/locks/w")
    node = f"{zk_namespace}{_holder_node(holder)}"
    assert not waiter.acquire(timeout=0.3)
    wait_until(
        lambda: waiter_client.session_id not in _watchers_of(zk_server, node),
        "the waiter's watch removed on the server",
        timeout=10,
    )
    assert not waiter_client.kazoo_client._data_watchers.get(node)
    holder.release()


def test_a_cancelled_waiter_leaves_no_watch_on_the_server(
    zk_client_factory: ClientFactory, zk_server: ZooKeeperServer, zk_namespace: str
) -> None:
    holder = Lock(zk_client_factory(), "/locks/c")
    assert holder.acquire()
    waiter_client = zk_client_factory()
    waiter = Lock(waiter_client, "/locks/c")
    node = f"{zk_namespace}{_holder_node(holder)}"
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(waiter.acquire(timeout=30)))
    thread.start()
    wait_until(
        lambda: waiter_client.session_id in _watchers_of(zk_server, node),
        "the waiter watches the holder",
        timeout=10,
    )
    waiter.cancel()
    thread.join(10)
    assert result == [False]
    wait_until(
        lambda: waiter_client.session_id not in _watchers_of(zk_server, node),
        "the waiter's watch removed on the server",
        timeout=10,
    )
    holder.release()


def test_another_watch_of_the_client_on_the_node_is_woken_to_read_again(
    zk_client_factory: ClientFactory, zk_client: ZkClient
) -> None:
    holder = Lock(zk_client_factory(), "/locks/o")
    assert holder.acquire()
    node = _holder_node(holder)
    waiter_client = zk_client_factory()
    events = Recorder[WatchEvent]()
    waiter_client.exists(node, watch=events)
    assert not Lock(waiter_client, "/locks/o").acquire(timeout=0.3)
    # The server's one data watch of this connection on the node went with the waiter's:
    # the other watcher hears NONE, as after a reconnect, instead of nothing, ever.
    event = events.wait_for(lambda e: True)
    assert event.type is WatchEventType.NONE
    holder.release()
