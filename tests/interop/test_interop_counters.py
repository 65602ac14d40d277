"""Our SharedCount and AtomicLong next to Curator 5.4's SharedCount and DistributedAtomicLong.

Values written on one side read right on the other, negative ones included, with the
very same bytes (the peer's ``getdata`` hex), and Java and Python incrementing one
counter at the same time add up exactly. Curator peers take absolute paths: ours live
under the test's namespace, so the peer gets ``zk_namespace + path``.
"""

from __future__ import annotations

import asyncio
import functools
import struct
import threading
from collections.abc import Callable

from zk_recipes import AtomicLong, SharedCount, VersionedValue, ZkClient, aio
from zk_recipes.testing import wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

from .curator import CuratorPeer, PeerFactory


def java_get(peer: CuratorPeer, handle: str) -> int:
    return int(peer.call(f"get {handle}"))


def test_shared_count_values_cross_both_ways_byte_for_byte(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    full = f"{zk_namespace}/count"
    peer.call(f"sharedcount j {full} -2")  # Java seeds the node
    assert peer.call(f"getdata {full}") == "fffffffe"
    seen: list[int] = []
    with SharedCount(zk_client_factory(), "/count", 99) as ours:  # our seed is not used
        ours.add_listener(seen.append)
        assert ours.get() == -2
        # Java writes, we read (and our listener hears of it).
        peer.call("set j -123456")
        wait_until(lambda: ours.get() == -123456, "we see Java's value")
        wait_until(lambda: seen[-1:] == [-123456], "our listener saw it")
        # We write, Java reads: same bytes as Java's own.
        ours.set(-7)
        assert peer.call(f"getdata {full}") == struct.pack(">i", -7).hex() == "fffffff9"
        peer.wait_event("j changed -7", timeout=10)
        assert java_get(peer, "j") == -7
        # Versions agree, and a try_set on either side respects the other's writes.
        wait_until(
            lambda: peer.call("versioned j") == f"{ours.get()} {ours.versioned().version}",
            "Java's cached version matches ours",
        )
        assert ours.try_set(ours.versioned(), 2**31 - 1)
        peer.wait_event(f"j changed {2**31 - 1}", timeout=10)
        assert peer.call(f"trysetcount j {2**31 - 1} -2147483648") == "true"
        wait_until(lambda: ours.get() == -(2**31), "we see Java's try_set")
        assert ours.versioned() == VersionedValue(-(2**31), 4)
        assert peer.call(f"getdata {full}") == "80000000"


def test_a_count_seeded_by_us_is_read_by_java(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    with SharedCount(zk_client_factory(), "/deep/count", -5):
        full = f"{zk_namespace}/deep/count"
        assert peer.call(f"getdata {full}") == "fffffffb"
        peer.call(f"sharedcount j {full} 1")
        assert java_get(peer, "j") == -5
        assert peer.call("versioned j") == "-5 0"


def test_atomic_long_values_cross_both_ways_byte_for_byte(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    full = f"{zk_namespace}/atomic/long"
    peer.call(f"atomiclong j {full}")
    ours = AtomicLong(zk_client_factory(), "/atomic/long")
    assert java_get(peer, "j") == 0 == ours.get()  # no node: both read 0
    peer.call("set j -9000000000")  # Java forceSet
    assert ours.get() == -9000000000
    ours.force_set(-42)
    assert peer.call(f"getdata {full}") == struct.pack(">q", -42).hex() == "ffffffffffffffd6"
    assert java_get(peer, "j") == -42
    result = ours.increment()
    assert (result.succeeded, result.pre, result.post) == (True, -42, -41)
    assert peer.call("add j 5") == "true -41 -36"
    assert ours.get() == -36
    assert peer.call("cas j -36 7") == "true -36 7"
    assert ours.compare_and_set(7, -(2**63)).succeeded
    assert peer.call(f"getdata {full}") == "8000000000000000"
    assert java_get(peer, "j") == -(2**63)


def test_a_counter_created_by_us_is_read_by_java(
    curator_peer_factory: PeerFactory,
    zk_client: ZkClient,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    assert AtomicLong(zk_client, "/fresh/long").increment().post == 1  # created by our try
    full = f"{zk_namespace}/fresh/long"
    assert peer.call(f"getdata {full}") == "0000000000000001"
    peer.call(f"atomiclong j {full}")
    assert peer.call("add j -3") == "true 1 -2"


def test_java_and_python_increments_add_up_exactly(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    java_adds, python_threads, python_adds = 150, 2, 150
    peer = curator_peer_factory(zk_hosts)
    peer.call(f"atomiclong j {zk_namespace}/atomic/shared")
    start = threading.Barrier(python_threads + 1)
    java_failures = 0
    errors: list[BaseException] = []

    def java() -> None:
        nonlocal java_failures
        start.wait(10)
        done = 0
        while done < java_adds:
            succeeded, pre, post = peer.call("add j 1").split()
            if succeeded == "true":
                assert int(post) == int(pre) + 1
                done += 1
            else:
                java_failures += 1  # RetryNTimes(10, 10) gave up: not applied, go again

    def python(counter: AtomicLong) -> None:
        start.wait(10)
        done = 0
        while done < python_adds:
            if counter.increment().succeeded:
                done += 1

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)

        return run

    counters = [AtomicLong(zk_client_factory(), "/atomic/shared") for _ in range(python_threads)]
    threads = [threading.Thread(target=guarded(java))] + [
        threading.Thread(target=guarded(functools.partial(python, c))) for c in counters
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(50)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    total = java_adds + python_threads * python_adds
    assert counters[0].get() == total
    assert java_get(peer, "j") == total
    print(f"{total} increments; Java gave up {java_failures} times")


def test_the_asyncio_counters_cross_with_java_byte_for_byte_and_add_up_with_it(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    # aio.AtomicLong and aio.SharedCount drive the sync counters' steps: the same bytes
    # and tries, with Java on the other side.
    peer = curator_peer_factory(zk_hosts)
    client = zk_client_factory()
    full = f"{zk_namespace}/aio/long"
    peer.call(f"atomiclong j {full}")
    peer.call(f"sharedcount c {zk_namespace}/aio/count -2")

    async def main() -> int:
        ours = aio.AtomicLong(client, "/aio/long")
        await ours.force_set(-42)
        assert peer.call(f"getdata {full}") == "ffffffffffffffd6"
        assert (await ours.increment()).post == -41
        assert peer.call("add j 5") == "true -41 -36"
        assert await ours.get() == -36

        async def python_adds() -> None:
            done = 0
            while done < 100:
                done += (await ours.increment()).succeeded

        def java_adds() -> None:
            done = 0
            while done < 100:
                done += peer.call("add j 1").split()[0] == "true"

        await asyncio.wait_for(asyncio.gather(python_adds(), asyncio.to_thread(java_adds)), 50)
        async with aio.SharedCount(client, "/aio/count", 99) as count:
            assert count.get() == -2  # Java's seed
            values = count.values()
            peer.call("set c -123456")
            assert await asyncio.wait_for(values.__anext__(), 10) == -123456
            await count.set(-7)
            peer.wait_event("c changed -7", timeout=10)
            assert peer.call(f"getdata {zk_namespace}/aio/count") == "fffffff9"
        return await ours.get()

    assert asyncio.run(main()) == -36 + 200
    assert java_get(peer, "j") == 164
