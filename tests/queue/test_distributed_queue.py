"""DistributedQueue on a real server: Curator's bytes, lock-safe consumption, requeue, lost claims.

Items are checked on the server (node names and bytes) and through
consumers that record what they got. The claim-lost test expires the
consumer's session while its consumer runs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.containers import children_of
from zk_recipes import (
    JSON,
    DataTooLargeError,
    DistributedQueue,
    ItemContext,
    ZkClient,
    ZkTimeoutError,
)
from zk_recipes.testing import Recorder, TcpProxy, ZooKeeperServer, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def test_put_writes_curators_bytes_and_names(zk_client: ZkClient) -> None:
    with DistributedQueue(zk_client, "/dq/plain") as queue:
        path = queue.put(b"hello")
        assert path == "/dq/plain/queue-0000000000"
        assert zk_client.get(path)[0].hex() == "00010001010000000568656c6c6f02"
        multi = queue.put_multi([b"a", b"bc"])
        assert zk_client.get(multi)[0].hex() == "0001000101000000016101000000026263" + "02"
        assert len(queue) == 2
        assert queue.items() == [b"hello", b"a", b"bc"]
        # One marker of this producer at most, however many puts (each deletes the last).
        queue.put(b"more")
        assert len(zk_client.get_children("/dq/plain-puts")) == 1
    assert children_of(zk_client, "/dq/plain-puts") == []  # close() deletes it


def test_a_consumer_gets_every_item_in_order(zk_client: ZkClient) -> None:
    got = Recorder[object]()
    with DistributedQueue(zk_client, "/dq/order", lambda v, ctx: got(v), serializer=JSON) as q:
        for number in range(20):
            q.put({"n": number})
        got.wait_for(lambda v: v == {"n": 19})
    assert got.snapshot() == [{"n": n} for n in range(20)]
    assert zk_client.get_children("/dq/order") == []


def test_with_a_lock_path_a_raising_consumer_gets_the_item_again(zk_client: ZkClient) -> None:
    calls: list[bytes] = []
    done = threading.Event()

    def flaky(value: bytes, context: ItemContext) -> None:
        calls.append(value)
        assert context.fencing_token is not None
        if len(calls) == 1:
            raise RuntimeError("first try fails")
        context.transaction().create("/dq/side-effect", value)  # committed with the delete
        done.set()

    with DistributedQueue(
        zk_client, "/dq/requeue", flaky, lock_path="/dq/requeue-locks", retry_backoff=0.01
    ) as q:
        q.put(b"job")
        assert done.wait(20)
        # Committed with the item's delete, after the consumer returned.
        wait_until(lambda: zk_client.exists("/dq/side-effect") is not None, "committed")
    assert calls == [b"job", b"job"]
    assert zk_client.get("/dq/side-effect")[0] == b"job"
    wait_until(lambda: zk_client.get_children("/dq/requeue") == [], "consumed")
    wait_until(lambda: zk_client.get_children("/dq/requeue-locks") == [], "claims gone")


def test_a_claim_lost_mid_item_commits_nothing_and_another_consumer_runs_it(
    zk_client_factory: ClientFactory, zk_hosts: str
) -> None:
    first_client, second_client = zk_client_factory(), zk_client_factory()
    producer = DistributedQueue(zk_client_factory(), "/dq/lost").start()
    started, release = threading.Event(), threading.Event()
    contexts: list[ItemContext] = []

    def slow(value: bytes, context: ItemContext) -> None:
        contexts.append(context)
        context.transaction().create("/dq/first-wrote", value)
        started.set()
        release.wait(30)

    second_got = Recorder[bytes]()
    first = DistributedQueue(first_client, "/dq/lost", slow, lock_path="/dq/lost-locks").start()
    producer.put(b"item")
    assert started.wait(20)
    expire_session(first_client, hosts=zk_hosts)  # the claim goes with the session
    second = DistributedQueue(
        second_client, "/dq/lost", lambda v, ctx: second_got(v), lock_path="/dq/lost-locks"
    ).start()
    second_got.wait_for(lambda v: v == b"item", timeout=20)
    release.set()
    wait_until(lambda: contexts[0].lost.is_set(), "the first consumer was told")
    first.close()
    second.close()
    producer.close()
    assert second_client.exists("/dq/first-wrote") is None  # its writes were not committed


def test_a_bounded_put_waits_for_room_and_times_out(zk_client: ZkClient) -> None:
    with DistributedQueue(zk_client, "/dq/bounded", max_items=2) as queue:
        queue.put(b"1")
        queue.put(b"2")
        with pytest.raises(ZkTimeoutError, match="max_items=2"):
            queue.put(b"3", timeout=0.3)
        assert len(queue) == 2


def test_a_corrupted_node_is_moved_aside_not_dropped(zk_client: ZkClient) -> None:
    got = Recorder[bytes]()
    zk_client.create("/dq/bad/queue-0000000000", b"not an item", parents=True)
    with DistributedQueue(zk_client, "/dq/bad", lambda v, ctx: got(v)) as queue:
        queue.put(b"fine")
        got.wait_for(lambda v: v == b"fine")
    assert zk_client.get("/dq/bad-corrupted/queue-0000000000")[0] == b"not an item"


def test_a_put_whose_reply_is_lost_is_put_exactly_once(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    client = zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0)
    checker = zk_client_factory()
    queue = DistributedQueue(client, "/dq/once").start()
    queue.put(b"warm-up")
    outcome: list[object] = []
    proxied.drop_replies()
    putter = threading.Thread(target=lambda: outcome.append(queue.put(b"once")))
    putter.start()
    wait_until(lambda: len(checker.get_children("/dq/once")) == 2, "applied on the server")
    proxied.heal()  # the connection is reset: the client comes back on the same session
    putter.join(30)
    assert outcome, "the put did not return"
    assert len(checker.get_children("/dq/once")) == 2  # not put twice
    queue.close()


def test_an_item_over_the_servers_limit_is_refused_with_the_limit(zk_client: ZkClient) -> None:
    with DistributedQueue(zk_client, "/dq/big") as queue:
        with pytest.raises(DataTooLargeError, match="bytes"):
            queue.put(b"x" * (2 * 1024 * 1024))
        assert len(queue) == 0  # nothing half-written


def test_a_directory_near_javas_listing_limit_is_warned_of(
    zk_client: ZkClient, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zk_recipes._queue import listing

    monkeypatch.setattr(listing, "WARN_CHILDREN", 3)  # the real one is ~42,000
    with DistributedQueue(zk_client, "/dq/full") as queue:
        for _ in range(3):
            queue.put(b"x")
        assert len(queue) == 3
    assert "near the ~52428 a Java peer can list" in caplog.text


def test_a_waiting_consumer_survives_a_server_restart(zk_private_server: ZooKeeperServer) -> None:
    got = Recorder[bytes]()
    with ZkClient(zk_private_server.connect_string, session_timeout=4.0) as client:
        consumer = DistributedQueue(client, "/restart", lambda v, ctx: got(v)).start()
        zk_private_server.restart()
        with ZkClient(zk_private_server.connect_string) as producer:
            DistributedQueue(producer, "/restart").start().put(b"after the restart")
        got.wait_for(lambda v: v == b"after the restart", timeout=30)
        consumer.close()


def test_status_reports_show_the_queues_this_process_has_open(zk_client: ZkClient) -> None:
    from zk_recipes.frameworks import connection_report, connection_rows

    started, release = threading.Event(), threading.Event()

    def slow(value: bytes, context: ItemContext) -> None:
        started.set()
        release.wait(10)

    with DistributedQueue(zk_client, "/dq/status", slow, lock_path="/dq/status-locks") as q:
        q.put(b"1")
        q.put(b"2")
        assert started.wait(10)
        report = connection_report(zk_client)
        assert report["queues"] == [
            {"path": "/dq/status", "consuming": True, "items": 2, "claimed": 1, "dead": 0,
             "in_progress": "/dq/status/queue-0000000000", "retrying": 0}
        ]  # fmt: skip
        assert ("queues", "/dq/status: 2 items, 1 claimed (one in hand)") in connection_rows(report)
        assert connection_report(zk_client, server=False)["queues"] is None  # health: no reads
        release.set()
    assert connection_report(zk_client)["queues"] == []


@pytest.mark.parametrize("lock_path", [None, "/race-locks"], ids=["at-most-once", "lock-path"])
def test_racing_consumers_spread_out_instead_of_colliding_on_the_head(
    zk_private_server: ZooKeeperServer, lock_path: str | None
) -> None:
    """4 consumers, 400 items waiting: each item once, and few requests wasted on collisions.

    An item costs 2 requests without a lock path (read, delete) and 3 with
    one (claim, read, commit with the claim's delete). Consumers that all took
    from the head lost most items to each other: about 7 requests per item
    without a lock path and 11 with one. Counted on the server (``mntr``).
    """
    items, consumers = 400, 4
    hosts = zk_private_server.connect_string
    clients = [ZkClient(hosts, namespace=f"race-{lock_path is None}").start() for _ in range(5)]
    try:
        with DistributedQueue(clients[0], "/race") as producer:
            for number in range(items):
                producer.put(str(number).encode())
        got = Recorder[bytes]()
        before = _packets(zk_private_server)
        queues = [
            DistributedQueue(c, "/race", lambda v, ctx: got(v), lock_path=lock_path).start()
            for c in clients[1:]
        ]
        got.wait_for(lambda v: True, timeout=60, count=items)
        per_item = (_packets(zk_private_server) - before) / items
        for queue in queues:
            queue.close()
    finally:
        for client in clients:
            client.close()
    assert len(got.items) == len(set(got.items)) == items  # each item once
    ideal = 2 if lock_path is None else 3
    assert per_item <= ideal + 1.5, f"{per_item:.2f} requests per item with {consumers} consumers"


def _packets(server: ZooKeeperServer) -> int:
    for line in server.four_letter("mntr").splitlines():
        key, _, value = line.partition("\t")
        if key == "zk_packets_received":
            return int(value)
    raise AssertionError("no zk_packets_received in mntr")
