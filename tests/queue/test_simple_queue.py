"""SimpleQueue on a real server: FIFO, racing consumers get each item once, waits survive faults."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.containers import children_of
from zk_recipes import SimpleQueue, ZkClient, ZkTimeoutError
from zk_recipes.testing import TcpProxy, ZooKeeperServer, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def test_fifo_peek_poll_take_and_len(zk_client: ZkClient) -> None:
    queue = SimpleQueue(zk_client, "/q/simple")
    assert queue.poll() is None  # no directory yet: empty, not an error
    assert queue.peek() is None
    first = queue.offer(b"a")
    queue.offer(b"b")
    assert first == "/q/simple/qn-0000000000"  # Curator's names
    assert zk_client.get(first)[0] == b"a"  # the item's bytes as they are
    zk_client.create("/q/simple/foreign")  # not an item: ignored
    assert len(queue) == 2
    assert queue.peek() == b"a"
    assert queue.take(1) == b"a"
    assert queue.poll() == b"b"
    assert queue.poll(0.2) is None
    with pytest.raises(ZkTimeoutError, match=r"within 0\.2 s"):
        queue.take(0.2)


def test_racing_consumers_get_each_item_exactly_once(zk_client_factory: ClientFactory) -> None:
    producer = SimpleQueue(zk_client_factory(), "/q/race")
    got: list[bytes] = []
    lock = threading.Lock()
    done = threading.Event()

    def consume(client: ZkClient) -> None:
        queue = SimpleQueue(client, "/q/race")
        while not done.is_set():
            item = queue.poll(0.2)
            if item is not None:
                with lock:
                    got.append(item)

    consumers = [threading.Thread(target=consume, args=(zk_client_factory(),)) for _ in range(4)]
    for thread in consumers:
        thread.start()
    items = [str(i).encode() for i in range(200)]
    for item in items:
        producer.offer(item)
    wait_until(lambda: len(got) >= 200, "every item taken", timeout=60)
    done.set()
    for thread in consumers:
        thread.join(10)
    assert sorted(got) == sorted(items)  # none lost, none twice


def test_a_blocked_take_survives_a_cut_and_a_reaped_directory(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    consumer = zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0)
    producer = SimpleQueue(zk_client_factory(), "/q/wait")
    producer.offer(b"first")
    queue = SimpleQueue(consumer, "/q/wait")
    assert queue.take(5) == b"first"
    # The container is now empty: the server reaps it while we wait.
    result: list[bytes] = []
    waiter = threading.Thread(target=lambda: result.append(queue.take(30)))
    waiter.start()
    time.sleep(0.5)
    proxied.blackhole()
    producer.offer(b"during the cut")
    time.sleep(0.5)
    proxied.heal()
    waiter.join(30)
    assert result == [b"during the cut"]


def test_a_lost_delete_reply_delivers_the_item_rather_than_dropping_it(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    consumer = zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0)
    queue = SimpleQueue(consumer, "/q/lost")
    item = queue.offer(b"only once")
    checker = zk_client_factory()
    outcome: list[bool] = []
    proxied.drop_replies()  # the delete reaches the server; its reply does not come back
    deleting = threading.Thread(target=lambda: outcome.append(queue._delete(item)))
    deleting.start()
    wait_until(lambda: checker.exists(item) is None, "deleted on the server")
    wait_until(lambda: not consumer.state or not consumer.state.is_connected, "cut noticed")
    proxied.heal()
    deleting.join(30)
    # Curator's SimpleDistributedQueue takes NoNode here for "another consumer had it"
    # and drops the item; we deliver it (at-least-once for this case).
    assert outcome == [True]


def test_an_offer_whose_reply_was_lost_puts_the_item_once(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    """Review 3, Q4: the offer was applied, its reply lost, and a blind retry put it twice."""
    producer = zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0)
    checker = zk_client_factory()
    queue = SimpleQueue(producer, "/q/offer")
    first = queue.offer(b"first")  # the directory and this producer's marker exist
    result: list[object] = []
    proxied.drop_replies()  # the offer reaches the server; its reply does not come back
    offering = threading.Thread(target=lambda: result.append(queue.offer(b"job")))
    offering.start()
    wait_until(lambda: len(checker.get_children("/q/offer")) == 2, "applied on the server")
    proxied.heal()  # the connection is reset: the client comes back on the same session
    offering.join(30)
    names = sorted(checker.get_children("/q/offer"))
    assert len(names) == 2  # not three: offered once
    assert [checker.get(f"/q/offer/{name}")[0] for name in names] == [b"first", b"job"]
    assert result == [f"/q/offer/{names[1]}"]  # found by the zxid it shares with the marker
    assert first == f"/q/offer/{names[0]}"
    assert len(checker.get_children("/q/offer-puts")) == 1  # one marker per producer
    queue.close()
    wait_until(lambda: children_of(checker, "/q/offer-puts") == [], "marker gone at close")
