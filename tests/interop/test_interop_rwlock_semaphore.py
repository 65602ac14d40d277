"""Our ReadWriteLock, Semaphore and SemaphoreMutex next to Curator 5.4's on the same paths.

A Java peer (one Curator session) and our clients share a read-write lock
queue, a semaphore's lease count and a semaphore mutex: each side must
exclude (or share with) the other exactly as its own kind would, and hand
over in queue order. Curator peers take absolute paths: ours live under the
test's namespace, so the peer gets ``zk_namespace + path``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from zk_recipes import NoNodeError, ReadWriteLock, Semaphore, SemaphoreMutex, ZkClient, aio
from zk_recipes._locks.rwlock import READ_TOKEN, WRITE_TOKEN
from zk_recipes.testing.pytest_plugin import ClientFactory

from .curator import CuratorPeer, PeerFactory


def queue(client: ZkClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:  # an emptied directory is a container: reaped at any time
        return []


def wait_queue(client: ZkClient, path: str, length: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while len(queue(client, path)) < length:
        assert time.monotonic() < deadline, f"queue on {path} never reached {length}"
        time.sleep(0.02)


def in_thread(fn: Callable[[], bool]) -> tuple[threading.Thread, list[bool]]:
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    thread.start()
    return thread, result


def no_event(peer: CuratorPeer, pattern: str, settle: float = 0.3) -> bool:
    time.sleep(settle)  # give a wrong hand-over the time to happen
    return peer.poll_event(pattern) is None


def test_curator_writer_blocks_our_readers_and_writers(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    client = zk_client_factory()
    peer.call(f"rwlock rw {zk_namespace}/rw")
    write = peer.call("acquire rw.write 5000", timeout=15).removeprefix("acquired ")
    assert WRITE_TOKEN in write

    ours = ReadWriteLock(client, "/rw")
    assert not ours.read_lock.acquire(timeout=0.5)
    assert not ours.write_lock.acquire(timeout=0.5)
    assert queue(client, "/rw") == [write.rsplit("/", 1)[1]]  # our attempts left nothing

    nodes: list[str] = []
    got_it = threading.Event()
    may_release = threading.Event()

    def reader() -> bool:  # a read lock belongs to the thread that took it
        if not ours.read_lock.acquire(timeout=15):
            return False
        nodes.append(ours.read_lock.node or "")
        got_it.set()
        may_release.wait(15)
        ours.read_lock.release()
        return True

    reading, result = in_thread(reader)
    wait_queue(client, "/rw", 2)
    assert not got_it.wait(0.2)
    peer.call("release rw.write")
    assert got_it.wait(15)
    assert READ_TOKEN in nodes[0]
    # Curator sees our reader in its queue, and a Curator reader shares the lock with it.
    assert peer.call("participants rw").split() == [f"{zk_namespace}{nodes[0]}"]
    assert peer.call("acquire rw.read 5000", timeout=15).startswith("acquired ")
    may_release.set()
    reading.join(15)
    assert result == [True]
    peer.call("release rw.read")


def test_our_writer_blocks_curator_readers_and_writers(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    ours = ReadWriteLock(zk_client_factory(), "/rw")
    assert ours.write_lock.acquire()
    peer.call(f"rwlock r {zk_namespace}/rw")
    peer.call(f"rwlock w {zk_namespace}/rw")
    assert peer.call("acquire r.read 500", timeout=10) == "timeout"
    assert peer.call("acquire w.write 500", timeout=10) == "timeout"
    assert peer.call("acquire r.read") == "pending"
    wait_queue(ours.client, "/rw", 2)
    assert no_event(peer, "r.read acquired .*")
    ours.write_lock.release()
    assert peer.wait_event("r.read acquired .*", timeout=10).startswith("r.read acquired ")
    # A Curator reader holds: our reader shares, our writer waits.
    assert ours.read_lock.acquire(timeout=5)
    ours.read_lock.release()
    assert not ours.write_lock.acquire(timeout=0.3)
    peer.call("release r.read")
    assert ours.write_lock.acquire(timeout=5)
    ours.write_lock.release()


def test_our_downgrade_keeps_a_queued_curator_writer_out(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    ours = ReadWriteLock(zk_client_factory(), "/down")
    assert ours.write_lock.acquire()
    peer.call(f"rwlock w {zk_namespace}/down")
    assert peer.call("acquire w.write") == "pending"
    wait_queue(ours.client, "/down", 2)

    assert ours.read_lock.acquire(blocking=False)  # downgrade: a read node at our writer's place
    assert (ours.read_lock.node or "")[-10:] == (ours.write_lock.node or "")[-10:]
    ours.write_lock.release()
    # Curator 5.4's writer re-lists on its predecessor's deletion and finds our read first.
    assert no_event(peer, "w.write acquired .*", settle=0.5)
    assert peer.call("participants w").split()[0] == f"{zk_namespace}{ours.read_lock.node}"
    ours.read_lock.release()
    assert peer.wait_event("w.write acquired .*", timeout=10).startswith("w.write acquired ")
    peer.call("release w.write")


def test_write_lock_fifo_across_languages(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    # Queue: ours (holder) -> Curator j1 -> ours -> Curator j2; served in that order.
    path = "/fifo"
    peer = curator_peer_factory(zk_hosts)
    observer = zk_client_factory()
    holder = ReadWriteLock(zk_client_factory(), path)
    waiter = ReadWriteLock(zk_client_factory(), path)
    assert holder.write_lock.acquire()
    order: list[str] = []
    guard = threading.Lock()
    peer.call(f"rwlock j1 {zk_namespace}{path}")
    peer.call(f"rwlock j2 {zk_namespace}{path}")

    assert peer.call("acquire j1.write") == "pending"
    wait_queue(observer, path, 2)

    def python_waiter() -> bool:
        if not waiter.write_lock.acquire(timeout=30):
            return False
        with guard:
            order.append("py")
        time.sleep(0.05)
        waiter.write_lock.release()
        return True

    thread, result = in_thread(python_waiter)
    wait_queue(observer, path, 3)
    assert peer.call("acquire j2.write") == "pending"
    wait_queue(observer, path, 4)

    holder.write_lock.release()
    peer.wait_event("j1.write acquired .*", timeout=10)
    with guard:
        order.append("j1")
    time.sleep(0.2)
    assert order == ["j1"]  # our waiter (queued before j2) waits behind j1
    peer.call("release j1.write")
    thread.join(15)
    assert result == [True]
    peer.wait_event("j2.write acquired .*", timeout=10)
    with guard:
        order.append("j2")
    peer.call("release j2.write")
    assert order == ["j1", "py", "j2"]


def test_semaphores_share_one_lease_count(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    client = zk_client_factory()
    peer.call(f"semaphore s {zk_namespace}/sem 2")
    leases = peer.call("acquire s 5000 2", timeout=15).split()[1:]
    assert len(leases) == 2

    sem = Semaphore(client, "/sem", 2)
    assert not sem.acquire(timeout=0.5)
    assert sorted(queue(client, "/sem/leases")) == sorted(p.rsplit("/", 1)[1] for p in leases)
    waiting, result = in_thread(lambda: sem.acquire(timeout=15))
    wait_queue(client, "/sem/leases", 3)  # our pending lease, counted against the limit
    time.sleep(0.2)
    assert result == []
    peer.call(f"release s {leases[0]}")
    waiting.join(15)
    assert result == [True]
    assert len(queue(client, "/sem/leases")) == 2
    # Curator counts our lease: one of its own and ours make two.
    assert peer.call("acquire s 500", timeout=10) == "timeout"
    assert len(queue(client, "/sem/leases")) == 2

    # The other way round: we hold both, Curator waits for one of ours.
    peer.call("release s")
    more = sem.acquire_leases(1, timeout=5)
    assert len(more) == 1
    assert peer.call("acquire s 300", timeout=10) == "timeout"
    assert peer.call("acquire s") == "pending"
    assert no_event(peer, "s acquired .*")
    more[0].close()
    got = peer.wait_event("s acquired .*", timeout=10).split()[2]
    assert got.startswith(f"{zk_namespace}/sem/leases/_c_")
    assert len(queue(client, "/sem/leases")) == 2
    assert peer.call("participants s").split()[1] == got
    peer.call("release s")
    sem.release()


def test_semaphore_mutexes_exclude_each_other(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    client = zk_client_factory()
    peer.call(f"semmutex m {zk_namespace}/smutex")
    held = peer.call("acquire m 5000", timeout=15).removeprefix("acquired ")
    assert held.startswith(f"{zk_namespace}/smutex/leases/_c_")

    mutex = SemaphoreMutex(client, "/smutex")
    assert not mutex.acquire(timeout=0.5)
    taking, result = in_thread(lambda: mutex.acquire(timeout=15))
    wait_queue(client, "/smutex/leases", 2)
    time.sleep(0.2)
    assert result == []
    peer.call("release m")
    taking.join(15)
    assert result == [True]

    assert peer.call("acquire m 300", timeout=10) == "timeout"
    assert peer.call("acquire m") == "pending"
    assert no_event(peer, "m acquired .*")
    mutex.release()  # any thread may release a SemaphoreMutex, the main one included
    assert peer.wait_event("m acquired .*", timeout=10).startswith("m acquired ")
    assert not mutex.acquire(timeout=0.3)
    peer.call("release m")


def test_the_asyncio_halves_queue_with_curators(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    """aio.ReadWriteLock in Curator's queue: our downgrade keeps its writer out, its writer
    keeps our reader waiting until it lets go."""
    peer = curator_peer_factory(zk_hosts)
    client = zk_client_factory()
    peer.call(f"rwlock w {zk_namespace}/aio-rw")

    async def main() -> None:
        rw = aio.ReadWriteLock(client, "/aio-rw")
        async with rw.write_lock:
            assert await asyncio.to_thread(peer.call, "acquire w.write") == "pending"
            await asyncio.to_thread(wait_queue, client, "/aio-rw", 2)
            assert await rw.read_lock.acquire(blocking=False)  # the downgrade
        assert await asyncio.to_thread(no_event, peer, "w.write acquired .*", 0.5)
        await rw.read_lock.release()
        event = await asyncio.to_thread(peer.wait_event, "w.write acquired .*", 10)
        assert event.startswith("w.write acquired ")

        async def read() -> str:
            async with rw.read_lock:
                return str(rw.read_lock.node)

        reader = asyncio.ensure_future(read())
        await asyncio.to_thread(wait_queue, client, "/aio-rw", 2)
        assert not reader.done()
        await asyncio.to_thread(peer.call, "release w.write")
        assert READ_TOKEN in await asyncio.wait_for(reader, 15)

    asyncio.run(main())
    assert queue(client, "/aio-rw") == []


def test_the_asyncio_semaphore_counts_curators_leases(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    """aio.Semaphore and Curator's InterProcessSemaphoreV2 on one path share two leases."""
    peer = curator_peer_factory(zk_hosts)
    client = zk_client_factory()
    peer.call(f"semaphore s {zk_namespace}/aio-sem 2")
    leases = peer.call("acquire s 5000 2", timeout=15).split()[1:]
    assert len(leases) == 2

    async def main() -> None:
        sem = aio.Semaphore(client, "/aio-sem", 2)
        assert not await sem.acquire(timeout=0.5)
        waiting = asyncio.ensure_future(sem.acquire(timeout=15))
        await asyncio.to_thread(wait_queue, client, "/aio-sem/leases", 3)
        assert not waiting.done()
        await asyncio.to_thread(peer.call, f"release s {leases[0]}")
        assert await waiting
        # Curator counts our lease: one of its own and ours make two.
        assert await asyncio.to_thread(peer.call, "acquire s 500", 10) == "timeout"
        await sem.release()
        event = await asyncio.to_thread(peer.call, "acquire s 5000", 15)
        assert event.startswith("acquired ")
        await asyncio.to_thread(peer.call, "release s")

    asyncio.run(main())
