"""The Curator peer itself, and Curator 5.4's znode layouts as CURATOR_COMPAT.md §2 states them.

Each test drives one or two ``CuratorPeer`` JVMs and inspects what they create
with a raw kazoo client: names, node types (``ephemeralOwner`` = the peer's
session), data bytes, and hand-over order. These facts are what our Python
recipes must match; if Curator ever disagrees with the document, these tests
say so first. Every wait is bounded.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zk_recipes.testing import wait_until

from .curator import CuratorPeer, CuratorPeerError, CuratorPeerTimeout, PeerFactory

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
SEQ = r"\d{10}"


def protected(token: str) -> re.Pattern[str]:
    """A protected sequential name: ``_c_<uuid>-<token><seq10>`` (§2.0)."""
    return re.compile(rf"_c_{UUID}-{re.escape(token)}{SEQ}")


def sequence(name: str) -> int:
    return int(name[-10:])


def basename(path: str) -> str:
    return path.rsplit("/", 1)[1]


@pytest.fixture
def kz(zk_hosts: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zk_hosts, timeout=10.0)
    client.start(timeout=10.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def children(kz: KazooClient, path: str) -> list[str]:
    return sorted(kz.get_children(path))


def ephemeral_owner(kz: KazooClient, path: str) -> int:
    _, stat = kz.get(path)
    return int(stat.ephemeralOwner)


def empty_or_gone(kz: KazooClient, path: str) -> bool:
    """Emptied lock directories are containers, which the server reaps at any moment."""
    try:
        return not kz.get_children(path)
    except NoNodeError:
        return True


# -- the peer ---------------------------------------------------------------------------------


def test_errors_are_replies_and_the_peer_lives_on(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str
) -> None:
    peer = curator_peer_factory(zk_hosts)
    assert peer.call("ping") == ""
    for line, message in [
        ("bogus", "unknown command bogus"),
        ("acquire nope 10", "no handle nope"),
        ("mutex m", "usage: mutex NAME PATH"),
        ("mutex a.b /x", "bad handle name"),
        ("getdata /does/not/exist", "NoNode"),
    ]:
        with pytest.raises(CuratorPeerError, match=re.escape(message)):
            peer.call(line)
    peer.call(f"mutex m {zk_namespace}/m")
    with pytest.raises(CuratorPeerError, match="IllegalMonitorStateException"):
        peer.call("release m")
    with pytest.raises(CuratorPeerError, match="handle exists"):
        peer.call(f"mutex m {zk_namespace}/m")
    assert peer.call("ping") == ""
    assert peer.session_id() != 0
    assert peer.returncode is None


def test_every_wait_is_bounded(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str
) -> None:
    peer = curator_peer_factory(zk_hosts)
    with pytest.raises(CuratorPeerTimeout, match="no event matching"):
        peer.wait_event("never", timeout=0.1)
    peer.call(f"mutex holder {zk_namespace}/m")
    peer.call(f"mutex waiter {zk_namespace}/m")
    peer.call("acquire holder 5000", timeout=15)
    with pytest.raises(CuratorPeerTimeout, match="no reply within"):
        peer.call("acquire waiter 1000", timeout=0.2)
    # the late reply would answer the next command: the peer refuses to go on
    with pytest.raises(CuratorPeerError, match="out of step"):
        peer.call("ping")
    peer.close()
    assert peer.returncode == 0


def test_close_ends_the_session_at_once_and_reaps_the_jvm(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    peer = curator_peer_factory(zk_hosts, session_timeout_ms=20000)
    peer.call(f"mutex m {zk_namespace}/m")
    node = peer.call("acquire m 5000", timeout=15).removeprefix("acquired ")
    assert kz.exists(node) is not None
    peer.close()
    assert peer.returncode == 0
    # well inside the 20 s session timeout: quit closed the session
    wait_until(lambda: kz.exists(node) is None, "the closed peer's lock node is deleted", 5.0)
    with pytest.raises(CuratorPeerError, match="closed"):
        peer.call("ping")


# -- locks ------------------------------------------------------------------------------------


def test_mutex_node_is_a_protected_ephemeral_sequential_under_container_parents(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    peer = curator_peer_factory(zk_hosts)
    session = peer.session_id()
    lock_dir = f"{zk_namespace}/a/b/mutex"
    peer.call(f"mutex m {lock_dir}")

    held = peer.call("acquire m 5000", timeout=15)
    node = held.removeprefix("acquired ")
    assert held.startswith("acquired ")
    assert node.rsplit("/", 1)[0] == lock_dir
    name = basename(node)
    assert protected("lock-").fullmatch(name), name
    assert len(name) == len("_c_") + 36 + len("-lock-") + 10
    assert children(kz, lock_dir) == [name]
    assert ephemeral_owner(kz, node) == session
    assert peer.call(f"getdata {node}") == kz.get(node)[0].hex()  # default data: the host IP

    # re-entrant: the same node again, no second child
    assert peer.call("acquire m 5000", timeout=15) == held
    assert children(kz, lock_dir) == [name]
    assert peer.call("participants m") == node
    assert peer.call("isacquired m") == "true"
    # parents are CONTAINER nodes, which read as ephemeralOwner 0 like persistent ones;
    # the server reaps them once emptied (below)
    assert ephemeral_owner(kz, f"{zk_namespace}/a/b") == 0

    peer.call("release m")
    assert kz.exists(node) is not None  # still held once
    peer.call("release m")
    assert kz.exists(node) is None
    assert peer.call("isacquired m") == "false"
    wait_until(lambda: kz.exists(f"{zk_namespace}/a") is None, "container parents reaped", 10.0)


def test_mutex_excludes_across_peers_and_hands_over_in_fifo_order(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    a = curator_peer_factory(zk_hosts)
    b = curator_peer_factory(zk_hosts)
    path = f"{zk_namespace}/fifo"
    a.call(f"mutex first {path}")
    a.call(f"mutex third {path}")  # same peer, another handle = another Java thread
    b.call(f"mutex second {path}")

    first = a.call("acquire first 5000", timeout=15).removeprefix("acquired ")
    assert b.call("acquire second 300") == "timeout"  # a timed waiter gives up ...
    assert children(kz, path) == [basename(first)]  # ... and deletes its node
    assert b.call("acquire second") == "pending"
    wait_until(lambda: len(kz.get_children(path)) == 2, "second contender queued", 10.0)
    assert a.call("acquire third") == "pending"
    wait_until(lambda: len(kz.get_children(path)) == 3, "third contender queued", 10.0)

    queue = a.call("participants first").split()
    assert queue[0] == first
    assert [sequence(n) for n in queue] == sorted(sequence(n) for n in queue)
    assert ephemeral_owner(kz, queue[1]) == b.session_id()
    assert ephemeral_owner(kz, queue[2]) == a.session_id()
    with pytest.raises(CuratorPeerError, match="busy"):
        b.call("release second")  # its thread is still inside acquire()

    time.sleep(0.3)
    assert b.poll_event("second acquired .*") is None
    assert a.poll_event("third acquired .*") is None
    a.call("release first")
    assert b.wait_event("second acquired .*") == f"second acquired {queue[1]}"
    time.sleep(0.3)
    assert a.poll_event("third acquired .*") is None
    b.call("release second")
    assert a.wait_event("third acquired .*") == f"third acquired {queue[2]}"
    a.call("release third")
    wait_until(lambda: empty_or_gone(kz, path), "all released", 10.0)


def test_cancel_interrupts_a_pending_acquire(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    peer = curator_peer_factory(zk_hosts)
    path = f"{zk_namespace}/cancel"
    peer.call(f"mutex holder {path}")
    peer.call(f"mutex waiter {path}")
    holder = peer.call("acquire holder 5000", timeout=15).removeprefix("acquired ")
    assert peer.call("acquire waiter") == "pending"
    wait_until(lambda: len(kz.get_children(path)) == 2, "waiter queued", 10.0)
    assert peer.call("cancel waiter") == "cancelled"
    assert peer.wait_event("waiter (.*)") == "waiter cancelled"
    wait_until(lambda: children(kz, path) == [basename(holder)], "waiter node deleted", 10.0)
    # the handle's thread survived the interrupt and serves the next acquire
    peer.call("release holder")
    assert peer.call("acquire waiter 5000", timeout=15).startswith("acquired ")
    assert peer.call("cancel waiter") == "idle"


def test_rwlock_nodes_and_downgrade(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    a = curator_peer_factory(zk_hosts)
    b = curator_peer_factory(zk_hosts)
    path = f"{zk_namespace}/rw"
    a.call(f"rwlock rw {path}")
    b.call(f"rwlock other {path}")

    write = a.call("acquire rw.write 5000", timeout=15).removeprefix("acquired ")
    assert protected("__WRIT__").fullmatch(basename(write))
    assert b.call("acquire other.read") == "pending"
    wait_until(lambda: len(kz.get_children(path)) == 2, "reader queued", 10.0)
    read = next(n for n in children(kz, path) if "__READ__" in n)
    assert protected("__READ__").fullmatch(read)
    assert sequence(read) > sequence(basename(write))
    assert ephemeral_owner(kz, f"{path}/{read}") == b.session_id()
    assert a.call("participants rw").split() == [write, f"{path}/{read}"]
    assert a.call("participants rw.write").split() == [write]  # Curator's per-half list

    # downgrade on the writer's own thread: 5.4 adds a sequential READ node after the
    # waiting reader's (CURATOR-621 changed this in 5.5)
    own_read = a.call("acquire rw.read 5000", timeout=15).removeprefix("acquired ")
    assert protected("__READ__").fullmatch(basename(own_read))
    assert sequence(basename(own_read)) > sequence(read)
    a.call("release rw.write")
    assert b.wait_event("other.read acquired .*") == f"other.read acquired {path}/{read}"
    a.call("release rw.read")
    b.call("release other.read")
    wait_until(lambda: empty_or_gone(kz, path), "released", 10.0)


def test_semaphore_v2_layout(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    a = curator_peer_factory(zk_hosts)
    b = curator_peer_factory(zk_hosts)
    path = f"{zk_namespace}/sem"
    a.call(f"semaphore s {path} 2")
    b.call(f"semaphore t {path} 2")

    leases = a.call("acquire s 5000 2", timeout=15).split()
    assert leases[0] == "acquired"
    leases = leases[1:]
    assert len(leases) == 2
    # locks/ held the internal mutex's node, released again: an empty container now,
    # which the server may already have reaped
    assert "leases" in children(kz, path)
    assert set(children(kz, path)) <= {"leases", "locks"}
    assert empty_or_gone(kz, f"{path}/locks")
    assert children(kz, f"{path}/leases") == sorted(basename(p) for p in leases)
    for lease in leases:
        assert lease.rsplit("/", 1)[0] == f"{path}/leases"
        assert protected("lease-").fullmatch(basename(lease))
        assert ephemeral_owner(kz, lease) == a.session_id()
    assert a.call("participants s").split() == leases
    assert a.call("isacquired s") == "true"

    assert b.call("acquire t 300") == "timeout"
    assert children(kz, f"{path}/leases") == sorted(basename(p) for p in leases)
    assert b.call("acquire t") == "pending"
    a.call(f"release s {leases[0]}")
    got = b.wait_event("t acquired .*").split()[2]
    assert protected("lease-").fullmatch(basename(got))
    assert ephemeral_owner(kz, got) == b.session_id()
    a.call("release s")
    b.call("release t")
    assert empty_or_gone(kz, f"{path}/leases")


def test_semaphore_mutex_layout(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    peer = curator_peer_factory(zk_hosts)
    path = f"{zk_namespace}/semmutex"
    peer.call(f"semmutex sm {path}")
    peer.call(f"semmutex other {path}")
    lease = peer.call("acquire sm 5000", timeout=15).removeprefix("acquired ")
    assert lease.rsplit("/", 1)[0] == f"{path}/leases"
    assert protected("lease-").fullmatch(basename(lease))
    assert "leases" in children(kz, path)
    assert set(children(kz, path)) <= {"leases", "locks"}
    assert peer.call("acquire other 300") == "timeout"
    peer.call("release sm")
    assert empty_or_gone(kz, f"{path}/leases")


# -- leadership -------------------------------------------------------------------------------


def test_leader_latch_nodes_ids_and_events(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    a = curator_peer_factory(zk_hosts)
    b = curator_peer_factory(zk_hosts)
    path = f"{zk_namespace}/latch"
    a.call(f"latch one {path} idA")
    a.wait_event("one isLeader")
    b.call(f"latch two {path} idB")
    wait_until(lambda: len(kz.get_children(path)) == 2, "second latch node", 10.0)

    nodes = sorted(kz.get_children(path), key=sequence)
    assert all(protected("latch-").fullmatch(n) for n in nodes), nodes
    assert [kz.get(f"{path}/{n}")[0] for n in nodes] == [b"idA", b"idB"]
    assert ephemeral_owner(kz, f"{path}/{nodes[0]}") == a.session_id()
    assert a.call("ourpath one") == f"{path}/{nodes[0]}"
    assert b.call("participants two") == "idA:true idB:false"
    assert a.call("hasleadership one") == "true"
    assert b.call("hasleadership two") == "false"
    assert b.call("await two 100") == "false"

    a.call("close one")
    b.wait_event("two isLeader")
    assert b.call("hasleadership two") == "true"
    assert a.poll_event("one notLeader") is None  # SILENT close
    b.call("close two NOTIFY_LEADER")
    b.wait_event("two notLeader")
    wait_until(lambda: empty_or_gone(kz, path), "latch gone", 10.0)


def test_leader_selector_leads_yields_and_requeues(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    a = curator_peer_factory(zk_hosts)
    b = curator_peer_factory(zk_hosts)
    path = f"{zk_namespace}/selector"
    a.call(f"selector one {path} selA")
    a.wait_event("one leading")
    b.call(f"selector two {path} selB")
    wait_until(lambda: len(kz.get_children(path)) == 2, "second selector queued", 10.0)

    nodes = sorted(kz.get_children(path), key=sequence)
    assert all(protected("lock-").fullmatch(n) for n in nodes), nodes  # it is a mutex
    assert [kz.get(f"{path}/{n}")[0] for n in nodes] == [b"selA", b"selB"]
    assert b.call("participants two") == "selA:true selB:false"
    with pytest.raises(CuratorPeerError, match="not leading"):
        b.call("yield two")

    a.call("yield one")
    a.wait_event("one yielded")
    b.wait_event("two leading")
    assert b.call("hasleadership two") == "true"
    # autoRequeue: the yielder queued again behind the new leader
    wait_until(lambda: len(kz.get_children(path)) == 2, "yielder requeued", 10.0)
    assert b.call("participants two") == "selB:true selA:false"
    b.call("close two")
    b.wait_event("two interrupted")
    a.wait_event("one leading")


# -- shared values ----------------------------------------------------------------------------


def test_shared_count_is_4_byte_big_endian(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    peer = curator_peer_factory(zk_hosts)
    path = f"{zk_namespace}/count"
    peer.call(f"sharedcount c {path} 5")
    data, stat = kz.get(path)
    assert data == b"\x00\x00\x00\x05"
    assert stat.ephemeralOwner == 0
    peer.call("set c -2")
    assert kz.get(path)[0].hex() == "fffffffe"
    assert peer.call(f"getdata {path}") == "fffffffe"

    kz.set(path, (70000).to_bytes(4, "big", signed=True))  # a foreign writer
    peer.wait_event("c changed 70000")
    assert peer.call("get c") == "70000"
    version = int(peer.call("versioned c").split()[1])
    assert peer.call("trysetcount c 70000 8") == "true"
    assert peer.call("trysetcount c 70000 9") == "false"
    assert peer.call("versioned c") == f"8 {version + 1}"
    assert kz.get(path)[0] == b"\x00\x00\x00\x08"


def test_distributed_atomic_long_is_8_byte_big_endian(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    peer = curator_peer_factory(zk_hosts)
    path = f"{zk_namespace}/atomic/long"
    peer.call(f"atomiclong a {path}")
    assert peer.call("get a") == "0"  # a missing node reads as 0
    assert peer.call("add a 7") == "true 0 7"
    assert kz.get(path)[0].hex() == "0000000000000007"
    assert peer.call("add a -9") == "true 7 -2"
    assert kz.get(path)[0].hex() == "fffffffffffffffe"
    kz.set(path, (2**40).to_bytes(8, "big", signed=True))
    assert peer.call("get a") == str(2**40)
    assert peer.call("cas a 1 5").split()[:2] == ["false", str(2**40)]
    assert peer.call(f"cas a {2**40} 5") == f"true {2**40} 5"


# -- failover ---------------------------------------------------------------------------------


def test_killed_holder_keeps_its_node_until_its_session_expires(
    curator_peer_factory: PeerFactory, zk_hosts: str, zk_namespace: str, kz: KazooClient
) -> None:
    holder: CuratorPeer = curator_peer_factory(zk_hosts, session_timeout_ms=2000)
    waiter = curator_peer_factory(zk_hosts)
    path = f"{zk_namespace}/failover"
    holder.call(f"mutex m {path}")
    waiter.call(f"mutex w {path}")
    node = holder.call("acquire m 5000", timeout=15).removeprefix("acquired ")
    assert waiter.call("acquire w") == "pending"
    wait_until(lambda: len(kz.get_children(path)) == 2, "waiter queued", 10.0)

    holder.kill()
    killed_at = time.monotonic()
    assert holder.returncode == -9
    assert kz.exists(node) is not None  # no goodbye: the session lives on for now

    waited = waiter.wait_event("w acquired .*", timeout=15.0)
    elapsed = time.monotonic() - killed_at
    assert kz.exists(node) is None
    assert waited.removeprefix("w acquired ").rsplit("/", 1)[0] == path
    assert elapsed > 1.0, f"lock handed over {elapsed:.2f}s after the kill: before expiry?"
    with pytest.raises(CuratorPeerError, match="exited"):
        holder.call("ping")
