"""Our queues next to Curator 5.4's (curator-recipes ``QueueBuilder`` and
``SimpleDistributedQueue``) on one ZooKeeper.

For the plain queue (with and without a lock path, ``putMulti`` included), the
priority, delay and id queues and the simple queue:

1. what Java puts, our consumer takes: the same bytes, in Curator's order
   (priority order, due order);
2. what we put, Curator's consumer takes (its ``EVENT <handle> item <hex>``);
3. the nodes each side writes for the same input have the same names and bytes
   (read with our client), and those are the names and bytes written out here
   by hand from Curator's source.

The id queue's ``remove(id)`` differs on purpose: Curator compares the id it is
given with the id in the node's name, where ``/`` and ``|`` were replaced by
``_``, so it never removes an item whose id has either; ours replaces first and
removes it. The test states both behaviours.

Curator peers take absolute paths: ours live under the test's namespace, so the
peer gets ``zk_namespace + path``. Every wait has a deadline; delay items are
due in the past or within about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from zk_recipes import (
    DelayQueue,
    DistributedQueue,
    IdQueue,
    ItemContext,
    PriorityQueue,
    SimpleQueue,
    ZkClient,
    aio,
    holders,
)
from zk_recipes.testing import Recorder, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

from .curator import CuratorPeer, CuratorPeerError, PeerFactory

SEQ_DIGITS = 10
LOCKS = ["no-lock-path", "lock-path"]


# -- Curator's names and bytes, written out by hand ------------------------------------------


def node_bytes(*items: bytes) -> bytes:
    """ItemSerializer: version 0x00010001, then per item 0x01 + int32 BE length + bytes, 0x02."""
    out = bytes.fromhex("00010001")
    for item in items:
        out += b"\x01" + len(item).to_bytes(4, "big") + item
    return out + b"\x02"


def seq(n: int) -> str:
    return f"{n:0{SEQ_DIGITS}d}"


def priority_name(priority: int) -> str:
    """DistributedPriorityQueue.priorityToString: '1' or '0' (negative), then 8 hex digits."""
    return "queue-" + ("1" if priority >= 0 else "0") + f"{priority & 0xFFFFFFFF:08X}"


def delay_name(due_ms: int) -> str:
    """DistributedDelayQueue.epochToString: the epoch in upper-case hex between bars."""
    return f"queue-|{due_ms:08X}|"


def id_name(item_id: str) -> str:
    """DistributedIdQueue.makeIdPath: the id, with '/' and '|' made '_', between bars."""
    return "queue-|" + item_id.replace("/", "_").replace("|", "_") + "|"


# -- helpers ---------------------------------------------------------------------------------


def arg(item: bytes) -> str:
    """An item as a peer argument: hex, or '-' for zero bytes."""
    return item.hex() or "-"


def nodes(client: ZkClient, path: str) -> list[tuple[str, bytes]]:
    """(name, data) of every child of ``path``, sorted by name."""
    return [(name, client.get(f"{path}/{name}")[0]) for name in sorted(client.get_children(path))]


def queue_names(client: ZkClient, path: str) -> list[str]:
    return sorted(name for name in client.get_children(path) if name.startswith("queue-"))


def queue_emptied(client: ZkClient, path: str, what: str) -> None:
    wait_until(lambda: not queue_names(client, path), f"{what}: {path} emptied")


def java_consumed(peer: CuratorPeer, handle: str, count: int, timeout: float = 15.0) -> list[bytes]:
    """The next ``count`` items Curator's consumer ``handle`` took, in the order it took them."""
    got = []
    for _ in range(count):
        event = peer.wait_event(rf"{handle} item [0-9a-f]*", timeout)
        got.append(bytes.fromhex(event.split(" ", 2)[2]))
    return got


def no_more_java_items(peer: CuratorPeer, handle: str) -> None:
    assert peer.poll_event(rf"{handle} item .*") is None, peer.events()


@contextlib.contextmanager
def java_queue(
    peer: CuratorPeer,
    handle: str,
    kind: str,
    path: str,
    lock_path: str | None = None,
    *,
    consumer: bool = True,
) -> Iterator[str]:
    """A started Curator queue (``kind`` plain|priority|delay|id); closed on the way out."""
    command = f"queue {handle} {kind} {path} {lock_path or '-'}"
    peer.call(command + ("" if consumer else " noconsumer"))
    try:
        yield handle
    finally:
        with contextlib.suppress(CuratorPeerError):
            peer.call(f"close {handle}")


def recording() -> tuple[Recorder[bytes], Callable[[bytes, ItemContext], None]]:
    """A recorder of what a consumer took, and that consumer."""
    got = Recorder[bytes]()

    def consume(value: bytes, context: ItemContext) -> None:
        got(value)

    return got, consume


def taken(got: Recorder[bytes], count: int, timeout: float = 15.0) -> list[bytes]:
    got.wait_for(lambda _value: True, timeout, count=count)
    return got.snapshot()


# -- plain DistributedQueue ------------------------------------------------------------------

PLAIN_SINGLES = [b"hello", b"\x00\xff binary \n", b""]
PLAIN_MULTI = [b"m1", b"", b"m3"]


def test_plain_nodes_are_the_same_on_both_sides(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    with java_queue(peer, "jp", "plain", zk_namespace + "/java", consumer=False):
        for item in PLAIN_SINGLES:
            peer.call(f"qput jp {arg(item)}")
        peer.call("qputmulti jp " + " ".join(arg(item) for item in PLAIN_MULTI))
    with DistributedQueue(client, "/py") as ours:
        put = [ours.put(item) for item in PLAIN_SINGLES]
        put.append(ours.put_multi(PLAIN_MULTI))
    expected = [
        (f"queue-{seq(0)}", bytes.fromhex("00010001" + "01" + "00000005" + "68656c6c6f" + "02")),
        (f"queue-{seq(1)}", node_bytes(PLAIN_SINGLES[1])),
        (f"queue-{seq(2)}", bytes.fromhex("00010001" + "01" + "00000000" + "02")),
        (f"queue-{seq(3)}", node_bytes(*PLAIN_MULTI)),
    ]
    assert nodes(client, "/java") == expected
    assert nodes(client, "/py") == expected
    assert put == [f"/py/{name}" for name, _ in expected]


@pytest.mark.parametrize("locking", LOCKS)
def test_plain_java_puts_we_consume(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
    locking: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    lock_path = "/q-locks" if locking == "lock-path" else None
    with java_queue(peer, "jp", "plain", zk_namespace + "/q", consumer=False):
        peer.call("qput jp " + arg(b"first"))
        peer.call("qputmulti jp " + " ".join(arg(item) for item in PLAIN_MULTI))
        peer.call("qput jp " + arg(b"\x00last\xff"))
    want = [b"first", *PLAIN_MULTI, b"\x00last\xff"]
    # holders() sees Curator's queue as ours: three nodes (the multi is one).
    [java] = [r for r in holders(client) if r.path == "/q"]
    assert (java.kind, java.items, java.holders) == ("queue", 3, ())
    got, consume = recording()
    with DistributedQueue(client, "/q", consume, lock_path=lock_path):
        assert taken(got, len(want)) == want
        queue_emptied(client, "/q", "our consumer")
    if lock_path is not None:
        wait_until(lambda: not client.get_children(lock_path), "our claims deleted")
    assert got.snapshot() == want


@pytest.mark.parametrize("locking", LOCKS)
def test_plain_we_put_java_consumes(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
    locking: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    with DistributedQueue(client, "/q") as ours:
        ours.put(b"first")
        ours.put_multi(PLAIN_MULTI)
        ours.put(b"\x00last\xff")
    want = [b"first", *PLAIN_MULTI, b"\x00last\xff"]
    lock_path = zk_namespace + "/q-locks" if locking == "lock-path" else None
    with java_queue(peer, "jq", "plain", zk_namespace + "/q", lock_path):
        assert java_consumed(peer, "jq", len(want)) == want
        queue_emptied(client, "/q", "Curator's consumer")
        no_more_java_items(peer, "jq")
    if lock_path is not None:
        # Curator deletes its claim just after the item, on its consumer thread.
        wait_until(lambda: not client.get_children("/q-locks"), "Curator's claims deleted")


def test_an_item_whose_attempts_we_counted_is_the_same_item_to_curator(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    """Our failed attempts are counted in a trailer after Curator's end byte (items.py):
    Curator's ItemSerializer stops at that byte, so its consumer reads the same items."""
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    failed = threading.Event()

    def fails(value: bytes, context: ItemContext) -> None:
        failed.set()
        raise RuntimeError("not this time")

    with DistributedQueue(client, "/tq", lock_path="/tq-locks") as producer:
        name = producer.put_multi(PLAIN_MULTI).rsplit("/", 1)[1]
    with DistributedQueue(
        client, "/tq", fails, lock_path="/tq-locks", retry_backoff=30, retry_backoff_max=30
    ):
        assert failed.wait(15)
        wait_until(lambda: client.get(f"/tq/{name}")[0] != node_bytes(*PLAIN_MULTI), "counted")
    data = client.get(f"/tq/{name}")[0]
    assert data.startswith(node_bytes(*PLAIN_MULTI))  # Curator's bytes, then our trailer
    assert data[len(node_bytes(*PLAIN_MULTI)) :].startswith(b"ZKR1")
    with java_queue(peer, "jt", "plain", zk_namespace + "/tq", zk_namespace + "/tq-locks"):
        assert java_consumed(peer, "jt", len(PLAIN_MULTI)) == PLAIN_MULTI
        queue_emptied(client, "/tq", "Curator's consumer")


def test_plain_consumers_of_both_sides_share_a_queue_with_a_lock_path(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    """Each item is taken once, by one side or the other: the claims are the same nodes."""
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    want = {f"item-{n}".encode() for n in range(20)}
    got, consume = recording()
    with (
        java_queue(peer, "jq", "plain", zk_namespace + "/q", zk_namespace + "/q-locks"),
        DistributedQueue(client, "/q", consume, lock_path="/q-locks") as ours,
    ):
        for n in range(0, 20, 2):
            ours.put(f"item-{n}".encode())
            peer.call("qput jq " + arg(f"item-{n + 1}".encode()))
        queue_emptied(client, "/q", "both consumers")
        wait_until(lambda: not client.get_children("/q-locks"), "every claim deleted")
        java: list[bytes] = []
        while (event := peer.poll_event(r"jq item [0-9a-f]*")) is not None:
            java.append(bytes.fromhex(event.split(" ", 2)[2]))
    ours_taken = got.snapshot()
    assert sorted(java + ours_taken) == sorted(want), (java, ours_taken)


# -- DistributedPriorityQueue ----------------------------------------------------------------

PRIORITIES = [5, -1, 0, 2**31 - 1, -(2**31), 5]


def test_priority_nodes_are_the_same_on_both_sides(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    items = [f"p{n}".encode() for n in range(len(PRIORITIES))]
    with java_queue(peer, "jp", "priority", zk_namespace + "/java", consumer=False):
        for item, priority in zip(items, PRIORITIES, strict=True):
            peer.call(f"qput jp {arg(item)} {priority}")
    with PriorityQueue(client, "/py") as ours:
        for item, priority in zip(items, PRIORITIES, strict=True):
            ours.put(item, priority=priority)
    expected = sorted(
        (priority_name(priority) + seq(n), node_bytes(item))
        for n, (item, priority) in enumerate(zip(items, PRIORITIES, strict=True))
    )
    assert expected[0][0] == "queue-080000000" + seq(4)  # the lowest int first
    assert nodes(client, "/java") == expected
    assert nodes(client, "/py") == expected


def test_priority_java_puts_we_consume_in_priority_order(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    with java_queue(peer, "jp", "priority", zk_namespace + "/pq", consumer=False):
        for item, priority in [(b"p5", 5), (b"m1", -1), (b"p0", 0), (b"p5-second", 5)]:
            peer.call(f"qput jp {arg(item)} {priority}")
    got, consume = recording()
    with PriorityQueue(client, "/pq", consume):
        assert taken(got, 4) == [b"m1", b"p0", b"p5", b"p5-second"]
        queue_emptied(client, "/pq", "our consumer")


def test_priority_we_put_java_consumes_in_priority_order(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    with PriorityQueue(client, "/pq") as ours:
        for item, priority in [(b"p5", 5), (b"m1", -1), (b"p0", 0), (b"p5-second", 5)]:
            ours.put(item, priority=priority)
    with java_queue(peer, "jq", "priority", zk_namespace + "/pq"):
        assert java_consumed(peer, "jq", 4) == [b"m1", b"p0", b"p5", b"p5-second"]
        queue_emptied(client, "/pq", "Curator's consumer")
        no_more_java_items(peer, "jq")


# -- DistributedDelayQueue -------------------------------------------------------------------


def test_delay_nodes_are_the_same_on_both_sides(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    dues = [1700000000000, 1, 0xFFFFFFFF, 2**40 + 7]
    items = [f"d{n}".encode() for n in range(len(dues))]
    with java_queue(peer, "jp", "delay", zk_namespace + "/java", consumer=False):
        for item, due in zip(items, dues, strict=True):
            peer.call(f"qput jp {arg(item)} {due}")
    with DelayQueue(client, "/py") as ours:
        for item, due in zip(items, dues, strict=True):
            ours.put(item, delay_until_ms=due)
    expected = sorted(
        (delay_name(due) + seq(n), node_bytes(item))
        for n, (item, due) in enumerate(zip(items, dues, strict=True))
    )
    assert (f"queue-|18BCFE56800|{seq(0)}", node_bytes(b"d0")) in expected
    assert (f"queue-|00000001|{seq(1)}", node_bytes(b"d1")) in expected
    assert nodes(client, "/java") == expected
    assert nodes(client, "/py") == expected


def test_delay_java_puts_we_consume_in_due_order(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    now_ms = int(time.time() * 1000)
    dues = {b"soon": now_ms + 800, b"late": now_ms - 1000, b"early": now_ms - 3000}
    with java_queue(peer, "jp", "delay", zk_namespace + "/dq", consumer=False):
        for item, due in dues.items():
            peer.call(f"qput jp {arg(item)} {due}")
    when: dict[bytes, float] = {}
    got = Recorder[bytes]()

    def consume(value: bytes, context: ItemContext) -> None:
        when[value] = time.time() * 1000
        got(value)

    with DelayQueue(client, "/dq", consume):
        assert taken(got, 3) == [b"early", b"late", b"soon"]
        queue_emptied(client, "/dq", "our consumer")
    assert when[b"soon"] >= dues[b"soon"], "consumed before it was due"


def test_delay_we_put_java_consumes_in_due_order(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    now_ms = int(time.time() * 1000)
    dues = {b"soon": now_ms + 800, b"late": now_ms - 1000, b"early": now_ms - 3000}
    with DelayQueue(client, "/dq") as ours:
        for item, due in dues.items():
            ours.put(item, delay_until_ms=due)
    with java_queue(peer, "jq", "delay", zk_namespace + "/dq"):
        assert java_consumed(peer, "jq", 2) == [b"early", b"late"]
        assert java_consumed(peer, "jq", 1) == [b"soon"]
        assert time.time() * 1000 >= dues[b"soon"], "consumed before it was due"
        queue_emptied(client, "/dq", "Curator's consumer")
        no_more_java_items(peer, "jq")


# -- DistributedIdQueue ----------------------------------------------------------------------

IDS = ["plain", "a/b|c", "x|y", "/lead"]


def test_id_nodes_are_the_same_on_both_sides(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    items = [f"i{n}".encode() for n in range(len(IDS))]
    with java_queue(peer, "jp", "id", zk_namespace + "/java", consumer=False):
        for item, item_id in zip(items, IDS, strict=True):
            peer.call(f"qput jp {arg(item)} {item_id}")
    with IdQueue(client, "/py") as ours:
        for item, item_id in zip(items, IDS, strict=True):
            ours.put(item, item_id=item_id)
    expected = sorted(
        (id_name(item_id) + seq(n), node_bytes(item))
        for n, (item, item_id) in enumerate(zip(items, IDS, strict=True))
    )
    assert (f"queue-|a_b_c|{seq(1)}", node_bytes(b"i1")) in expected
    assert nodes(client, "/java") == expected
    assert nodes(client, "/py") == expected


def test_id_java_puts_we_consume_fifo(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    with java_queue(peer, "jp", "id", zk_namespace + "/iq", consumer=False):
        for item, item_id in [(b"1", "zzz"), (b"2", "a/b|c"), (b"3", "aaa")]:
            peer.call(f"qput jp {arg(item)} {item_id}")
    got, consume = recording()
    with IdQueue(client, "/iq", consume):
        assert taken(got, 3) == [b"1", b"2", b"3"]  # put order: the id does not order
        queue_emptied(client, "/iq", "our consumer")


def test_id_we_put_java_consumes_fifo(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    with IdQueue(client, "/iq") as ours:
        for item, item_id in [(b"1", "zzz"), (b"2", "a/b|c"), (b"3", "aaa")]:
            ours.put(item, item_id=item_id)
    with java_queue(peer, "jq", "id", zk_namespace + "/iq"):
        assert java_consumed(peer, "jq", 3) == [b"1", b"2", b"3"]
        queue_emptied(client, "/iq", "Curator's consumer")
        no_more_java_items(peer, "jq")


def test_id_remove_of_an_id_with_slash_or_bar_curator_misses_ours_removes(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    """Curator's remove(id) compares the id as given with the replaced id in the node's name
    (a documented Curator bug): an id with '/' or '|' is never removed by it. Ours replaces
    first, so the same call removes the item."""
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    with (
        java_queue(peer, "jp", "id", zk_namespace + "/iq", consumer=False),
        IdQueue(client, "/iq") as ours,
    ):
        peer.call(f"qput jp {arg(b'odd-java')} a/b|c")
        ours.put(b"odd-ours", item_id="a/b|c")
        peer.call(f"qput jp {arg(b'bar-java')} x|y")
        peer.call(f"qput jp {arg(b'plain-java')} plain")
        ours.put(b"plain-ours", item_id="plain")
        assert queue_names(client, "/iq") == sorted(
            [
                id_name("a/b|c") + seq(0),
                id_name("a/b|c") + seq(1),
                id_name("x|y") + seq(2),
                id_name("plain") + seq(3),
                id_name("plain") + seq(4),
            ]
        )

        # Curator: the ids with '/' or '|' match nothing, both sides' items stay.
        assert peer.call("qremove jp a/b|c") == "0"
        assert peer.call("qremove jp x|y") == "0"
        assert len(queue_names(client, "/iq")) == 5
        # ... while a plain id is removed, whoever put it.
        assert peer.call("qremove jp plain") == "2"
        # Curator can only reach them by the replaced id.
        assert peer.call("qremove jp x_y") == "1"

        # Ours: the same id removes both items with it, Java's and ours.
        assert ours.remove("a/b|c") == 2
        assert queue_names(client, "/iq") == []
        assert ours.items() == []


# -- SimpleDistributedQueue ------------------------------------------------------------------

SIMPLE_ITEMS = [b"a", b"", b"\x00\x01 two words", b"last"]


def test_simple_nodes_are_the_same_on_both_sides(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    peer.call(f"simple js {zk_namespace}/java")
    ours = SimpleQueue(client, "/py")
    for item in SIMPLE_ITEMS:
        peer.call(f"soffer js {arg(item)}")
        ours.offer(item)
    peer.call("close js")
    expected = [(f"qn-{seq(n)}", item) for n, item in enumerate(SIMPLE_ITEMS)]
    assert nodes(client, "/java") == expected
    assert nodes(client, "/py") == expected


def test_simple_java_offers_we_take(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    peer.call(f"simple js {zk_namespace}/sq")
    for item in SIMPLE_ITEMS:
        peer.call(f"soffer js {arg(item)}")
    ours = SimpleQueue(client, "/sq")
    assert [ours.poll(5.0) for _ in SIMPLE_ITEMS] == SIMPLE_ITEMS
    assert ours.poll(0.1) is None

    # A waiting take is woken by Java's offer.
    results: list[bytes] = []
    waiter = threading.Thread(target=lambda: results.append(ours.take(10.0)))
    waiter.start()
    peer.call(f"soffer js {arg(b'wake')}")
    waiter.join(15.0)
    assert results == [b"wake"]
    peer.call("close js")


def test_simple_we_offer_java_takes(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    ours = SimpleQueue(client, "/sq")
    for item in SIMPLE_ITEMS:
        ours.offer(item)
    peer.call(f"simple js {zk_namespace}/sq")
    taken_by_java = [bytes.fromhex(peer.call("stake js 5000", timeout=15.0)) for _ in SIMPLE_ITEMS]
    assert taken_by_java == SIMPLE_ITEMS
    assert peer.call("stake js 100") == "-"

    # A waiting Curator poll is woken by our offer.
    results: list[str] = []
    waiter = threading.Thread(target=lambda: results.append(peer.call("stake js 10000", 20.0)))
    waiter.start()
    ours.offer(b"wake")
    waiter.join(25.0)
    assert results == [arg(b"wake")]
    assert len(ours) == 0
    peer.call("close js")


def test_the_asyncio_queues_cross_with_curators_both_ways(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    # aio.SimpleQueue and aio.DistributedQueue are the sync queues awaited: Curator's
    # offers are taken by a waiting coroutine, and Curator's consumer takes our puts.
    client = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    peer.call(f"simple js {zk_namespace}/asq")

    async def main() -> None:
        simple = aio.SimpleQueue(client, "/asq")
        waiting = asyncio.ensure_future(simple.take(10.0))
        await asyncio.sleep(0.1)
        await asyncio.to_thread(peer.call, f"soffer js {arg(b'from java')}")
        assert await waiting == b"from java"
        await simple.offer(b"from asyncio")
        taken = await asyncio.to_thread(peer.call, "stake js 5000", 15.0)
        assert bytes.fromhex(taken) == b"from asyncio"
        async with aio.DistributedQueue(client, "/aq") as ours:
            await ours.put(b"first")
            await ours.put_multi(PLAIN_MULTI)

    asyncio.run(main())
    peer.call("close js")
    want = [b"first", *PLAIN_MULTI]
    with java_queue(peer, "jq", "plain", zk_namespace + "/aq", None):
        assert java_consumed(peer, "jq", len(want)) == want
        queue_emptied(client, "/aq", "Curator's consumer")


# -- the peer's queue commands ---------------------------------------------------------------


def test_peer_queue_commands_answer_misuse_with_err(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str
) -> None:
    peer = curator_peer_factory(zk_hosts)
    path = zk_namespace + "/q"
    with pytest.raises(CuratorPeerError, match="plain, priority, delay or id"):
        peer.call(f"queue bad fifo {path}")
    peer.call(f"queue jp plain {path} - noconsumer")
    peer.call(f"queue jpr priority {path}-p - noconsumer")
    peer.call(f"queue ji id {path}-i - noconsumer")
    with pytest.raises(CuratorPeerError, match="takes no ARG"):
        peer.call("qput jp 00 5")
    with pytest.raises(CuratorPeerError, match="needs ARG"):
        peer.call("qput jpr 00")
    with pytest.raises(CuratorPeerError, match="not hex"):
        peer.call("qput jp xyz")
    with pytest.raises(CuratorPeerError, match="for plain queues"):
        peer.call("qputmulti jpr 00 01")
    with pytest.raises(CuratorPeerError, match="for id queues"):
        peer.call("qremove jp some-id")
    with pytest.raises(CuratorPeerError, match="not a simple queue"):
        peer.call("stake jp 10")
    assert peer.call("qremove ji nothing-here") == "0"
    for handle in ("jp", "jpr", "ji"):
        assert peer.call(f"close {handle}") == ""
    with pytest.raises(CuratorPeerError, match="no handle jp"):
        peer.call("qput jp 00")
    assert peer.call("ping") == ""  # the peer lives on
