"""Claims under faults (review 3): a claim's writes go out on its session only, and no item waits.

- Q1: a consumer whose session expired mid-item commits nothing, and deletes
  nothing of the consumer that has the item now (the next claim sits at the
  same path, at the same version: only the session tells them apart).
- M6: a second consumer thread of the same process does not take over the
  claim its client's earlier session still holds.
- Q2: an item whose claimant died is taken as soon as the claim goes, on a
  queue nobody puts into any more.
- An item another consumer holds for long holds up no other item.
- M3: ``IdQueue.remove`` never deletes an item under a running consumer.
"""

from __future__ import annotations

import threading

from zk_recipes import DistributedQueue, IdQueue, ItemContext
from zk_recipes.testing import (
    Recorder,
    TcpProxy,
    ZooKeeperServer,
    expire_session,
    expire_session_locally,
    wait_until,
)
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_a_consumer_whose_session_expired_commits_nothing_and_spares_the_next_claim(
    zk_client_factory: ClientFactory, zk_hosts: str
) -> None:
    writer = zk_client_factory()
    a_client = zk_client_factory(session_timeout=3.0)
    b_client = zk_client_factory(session_timeout=3.0)
    writer.create("/done", b"")
    a_started, a_release = threading.Event(), threading.Event()
    b_started, b_release = threading.Event(), threading.Event()
    a_contexts: list[ItemContext] = []

    def consumer_a(value: bytes, context: ItemContext) -> None:
        a_contexts.append(context)
        a_started.set()
        a_release.wait(30)
        context.transaction().create("/done/A", value)  # A's fenced write

    def consumer_b(value: bytes, context: ItemContext) -> None:
        b_started.set()
        b_release.wait(30)
        context.transaction().create("/done/B", value)

    with DistributedQueue(writer, "/q1", lock_path="/q1-locks") as producer:
        name = producer.put(b"job").rsplit("/", 1)[1]
    claim = f"/q1-locks/{name}"
    a = DistributedQueue(a_client, "/q1", consumer_a, lock_path="/q1-locks").start()
    b = None
    try:
        assert a_started.wait(10)
        expire_session(a_client, hosts=zk_hosts)  # A's claim goes with its session
        wait_until(lambda: a_client.wait_connected(0.1), "A on a new session")
        b = DistributedQueue(b_client, "/q1", consumer_b, lock_path="/q1-locks").start()
        assert b_started.wait(10)
        b_claim = writer.exists(claim)
        assert b_claim is not None
        assert b_claim.ephemeral_owner == b_client.session_id
        assert b_claim.version == 0  # what A's check(claim, 0) would pass on
        a_release.set()  # A's consumer returns: its commit must not go out
        wait_until(lambda: a_contexts[0].lost.is_set(), "A told its claim was lost")
        a.close(10)
        assert writer.exists("/done/A") is None
        assert writer.exists(claim) == b_claim  # B's claim untouched while B runs
        b_release.set()
        wait_until(lambda: writer.exists("/done/B") is not None, "B's write committed")
        wait_until(lambda: writer.get_children("/q1") == [], "the item consumed once, by B")
        wait_until(lambda: writer.get_children("/q1-locks") == [], "no claim left")
    finally:
        a_release.set()
        b_release.set()
        a.close(10)
        if b is not None:
            b.close(10)


def test_a_second_thread_does_not_take_over_a_claim_of_the_clients_earlier_session(
    zk_client_factory: ClientFactory,
) -> None:
    writer = zk_client_factory()
    client = zk_client_factory(session_timeout=10.0)
    a_started, a_release = threading.Event(), threading.Event()
    runs = Recorder[str]()

    def consumer_a(value: bytes, context: ItemContext) -> None:
        runs("A")
        a_started.set()
        a_release.wait(30)
        context.transaction().create("/m6-done", value)

    def consumer_b(value: bytes, context: ItemContext) -> None:
        runs("B")

    with DistributedQueue(writer, "/m6", lock_path="/m6-locks") as producer:
        name = producer.put(b"job").rsplit("/", 1)[1]
    a = DistributedQueue(client, "/m6", consumer_a, lock_path="/m6-locks").start()
    b = None
    try:
        assert a_started.wait(10)
        old = expire_session_locally(client)  # the client moves on; the server keeps it
        stat = writer.exists(f"/m6-locks/{name}")
        assert stat is not None
        assert stat.ephemeral_owner == old
        b = DistributedQueue(client, "/m6", consumer_b, lock_path="/m6-locks").start()
        a_release.set()
        a.close(10)
        assert runs.snapshot() == ["A"]  # B left the old session's claim alone
        assert writer.exists("/m6-done") is None  # A's commit was on a session that ended
        # The item is B's once the old session's claim goes (its session ends on the server).
        runs.wait_for(lambda who: who == "B", timeout=30)
    finally:
        a_release.set()
        a.close(10)
        if b is not None:
            b.close(10)


def test_an_item_whose_claimant_died_is_taken_without_another_put(
    zk_client_factory: ClientFactory, zk_private_server: ZooKeeperServer, zk_proxy: TcpProxy
) -> None:
    hosts = zk_private_server.connect_string
    writer = zk_client_factory(hosts=hosts)
    dying = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=3.0)
    live = zk_client_factory(hosts=hosts, session_timeout=3.0)
    started, release = threading.Event(), threading.Event()
    got = Recorder[bytes]()

    def hangs(value: bytes, context: ItemContext) -> None:
        started.set()
        release.wait(60)

    with DistributedQueue(writer, "/q2", lock_path="/q2-locks") as producer:
        name = producer.put(b"last item").rsplit("/", 1)[1]
    first = DistributedQueue(dying, "/q2", hangs, lock_path="/q2-locks").start()
    second = None
    try:
        assert started.wait(10)
        second = DistributedQueue(live, "/q2", lambda v, c: got(v), lock_path="/q2-locks").start()
        # The live consumer meets the claim and goes idle, watching it.
        wait_until(lambda: writer.exists(f"/q2-locks/{name}", watch=None) is not None, "claimed")
        zk_proxy.blackhole()  # the claimant dies, as far as the ensemble can tell
        got.wait_for(lambda value: value == b"last item", timeout=30)  # no put needed
        wait_until(lambda: writer.get_children("/q2") == [], "consumed")
    finally:
        release.set()
        zk_proxy.heal()
        if second is not None:
            second.close(10)
        first.close(10)


def test_an_item_held_for_long_holds_up_no_other(zk_client_factory: ClientFactory) -> None:
    writer = zk_client_factory()
    slow_client, fast_client = zk_client_factory(), zk_client_factory()
    started, release = threading.Event(), threading.Event()
    got = Recorder[bytes]()

    def slow(value: bytes, context: ItemContext) -> None:
        started.set()
        release.wait(60)

    producer = DistributedQueue(writer, "/q5", lock_path="/q5-locks").start()
    producer.put(b"slow")
    slow_queue = DistributedQueue(slow_client, "/q5", slow, lock_path="/q5-locks").start()
    fast_queue = None
    try:
        assert started.wait(10)
        for number in range(3):
            producer.put(f"next-{number}".encode())
        fast_queue = DistributedQueue(
            fast_client, "/q5", lambda v, c: got(v), lock_path="/q5-locks"
        ).start()
        got.wait_for(lambda value: value == b"next-2", count=1)
        assert got.snapshot() == [b"next-0", b"next-1", b"next-2"]
    finally:
        release.set()
        if fast_queue is not None:
            fast_queue.close(10)
        slow_queue.close(10)
        producer.close()


def test_remove_leaves_an_item_a_consumer_is_running(zk_client_factory: ClientFactory) -> None:
    writer, consumer_client = zk_client_factory(), zk_client_factory()
    started, release = threading.Event(), threading.Event()
    done = Recorder[bytes]()

    def slow(value: bytes, context: ItemContext) -> None:
        started.set()
        release.wait(30)
        done(value)

    with IdQueue(writer, "/q3", lock_path="/q3-locks") as ids:
        ids.put(b"running", item_id="order-7")
        consumer = IdQueue(consumer_client, "/q3", slow, lock_path="/q3-locks").start()
        try:
            assert started.wait(10)
            ids.put(b"waiting", item_id="order-7")
            # The one running is left to its consumer; the one waiting is removed.
            assert ids.remove("order-7") == 1
            release.set()
            done.wait_for(lambda value: value == b"running")
            wait_until(lambda: writer.get_children("/q3") == [], "consumed and removed")
            assert done.snapshot() == [b"running"]
        finally:
            release.set()
            consumer.close(10)
