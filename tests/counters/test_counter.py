"""SharedCount, AtomicLong, AtomicInt: exact counts across processes, Java's byte layout and
overflow, listeners in commit order, dataVersion wrap-around, corrupted data.
"""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from zk_recipes import (
    AtomicInt,
    AtomicLong,
    ConnectionState,
    CorruptedValueError,
    NodeError,
    PromotedToLock,
    RecipeUsageError,
    RetryNTimes,
    SharedCount,
    VersionedValue,
    ZkClient,
    ZkRecipesError,
    ZnodeStat,
)
from zk_recipes._counters.encoding import decode, encode, is_newer, wrap
from zk_recipes.testing import StateRecorder, TcpProxy, ZooKeeperServer, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class Recorder:
    """A SharedCount listener that remembers every value, in order."""

    def __init__(self) -> None:
        self.values: list[int] = []
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: int) -> None:
        with self._lock:
            self.values.append(value)
            self.threads.add(threading.current_thread().name)

    def last(self) -> int | None:
        with self._lock:
            return self.values[-1] if self.values else None


# -- bytes and numbers (no server) -----------------------------------------------------------


def test_encoding_is_javas_big_endian_twos_complement() -> None:
    assert encode(-2, 32).hex() == "fffffffe"  # Curator's SharedCount(-2), verified in Java
    assert encode(7, 64).hex() == "0000000000000007"
    assert encode(1, 32).hex() == "00000001"
    assert encode(LONG_MIN, 64).hex() == "8000000000000000"
    assert decode(bytes.fromhex("fffffffe"), 32, "/x", empty_is_zero=False) == -2
    assert decode(b"", 64, "/x", empty_is_zero=True) == 0
    # Trailing bytes are ignored, as Curator's ByteBuffer read does.
    assert decode(bytes.fromhex("0000000000000009ff"), 64, "/x", empty_is_zero=True) == 9
    with pytest.raises(CorruptedValueError, match="3 byte"):
        decode(b"\x01\x02\x03", 64, "/x", empty_is_zero=True)
    with pytest.raises(CorruptedValueError):
        decode(b"", 32, "/x", empty_is_zero=False)


def test_arithmetic_wraps_like_java() -> None:
    assert wrap(INT_MAX + 1, 32) == INT_MIN
    assert wrap(INT_MIN - 1, 32) == INT_MAX
    assert wrap(LONG_MAX + 1, 64) == LONG_MIN
    assert wrap(LONG_MIN - 1, 64) == LONG_MAX
    assert wrap(LONG_MIN + LONG_MIN, 64) == 0
    assert wrap(-5, 64) == -5


def test_newer_is_judged_by_mzxid_never_by_data_version() -> None:
    # dataVersion wraps from 2**31 - 1 to -2**31 (and restarts at 0 when the node is
    # re-created); Curator 5.4's "strictly higher version" rule is stuck there (CURATOR-688).
    assert is_newer(candidate_mzxid=1001, current_mzxid=1000)
    assert not is_newer(candidate_mzxid=1000, current_mzxid=1000)  # the same write again
    assert not is_newer(candidate_mzxid=999, current_mzxid=1000)  # a read that raced a write
    # zxids span epochs (high 32 bits): a new leader's first write is still newer.
    assert is_newer(candidate_mzxid=(5 << 32) | 1, current_mzxid=(4 << 32) | 0xFFFF)


# -- SharedCount -----------------------------------------------------------------------------


def test_shared_count_survives_a_data_version_wrap(zk_client: ZkClient) -> None:
    # ZooKeeper cannot be made to write 2**31 times in a test: feed the stats a wrap
    # would produce to the same path real reads and writes take.
    recorder = Recorder()
    with SharedCount(zk_client, "/wrap", 0) as count:
        count.add_listener(recorder)
        base: ZnodeStat = zk_client.get("/wrap")[1]
        count._offer(5, base._replace(version=INT_MAX, mzxid=base.mzxid + 10))
        count._offer(6, base._replace(version=INT_MIN, mzxid=base.mzxid + 11))
        assert count.versioned() == VersionedValue(6, INT_MIN)
        count._offer(7, base._replace(version=INT_MIN + 1, mzxid=base.mzxid + 12))
        count._offer(4, base._replace(version=INT_MAX, mzxid=base.mzxid + 9))  # older: ignored
        assert count.versioned() == VersionedValue(7, INT_MIN + 1)
        wait_until(lambda: recorder.last() == 7, "listener saw 7")
        assert recorder.values == [5, 6, 7]


def test_seed_bytes_and_a_seed_never_overwrites(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()
    with SharedCount(client, "/counts/a", -2) as first:
        assert first.get() == -2
        assert client.get("/counts/a")[0].hex() == "fffffffe"
        with SharedCount(zk_client_factory(), "/counts/a", 99) as second:
            assert second.get() == -2
            assert second.versioned() == first.versioned() == VersionedValue(-2, 0)


def test_set_and_try_set(zk_client_factory: ClientFactory) -> None:
    with (
        SharedCount(zk_client_factory(), "/counts/b", 0) as a,
        SharedCount(zk_client_factory(), "/counts/b", 0) as b,
    ):
        stale = a.versioned()
        assert stale == VersionedValue(0, 0)
        b.set(10)
        assert b.get() == 10  # our own write is in the cache at once
        assert a.try_set(stale, 11) is False  # b wrote since: BadVersion, nothing written
        assert a.versioned() == VersionedValue(10, 1)  # and a re-read the node
        # A VersionedValue this instance has not seen is refused without a write.
        assert a.try_set(VersionedValue(123, 1), 12) is False
        assert a.try_set(a.versioned(), 12) is True
        assert a.versioned() == VersionedValue(12, 2)
        wait_until(lambda: b.get() == 12, "b sees a's write")
        assert b.refresh() == VersionedValue(12, 2)
        with pytest.raises(ValueError, match="32-bit"):
            a.set(INT_MAX + 1)
        with pytest.raises(TypeError):
            a.try_set((12, 2), 13)  # type: ignore[arg-type]


def test_misuse_fails_at_once(zk_client: ZkClient) -> None:
    count = SharedCount(zk_client, "/counts/misuse", 1)
    with pytest.raises(RecipeUsageError, match="not started"):
        count.get()
    count.start()
    with pytest.raises(RecipeUsageError, match="already started"):
        count.start()
    count.close()
    count.close()  # idempotent
    with pytest.raises(RecipeUsageError, match="closed"):
        count.set(3)
    with pytest.raises(ValueError, match="seed"):
        SharedCount(zk_client, "/counts/misuse", 2**31)


def test_listeners_see_committed_values_in_order_with_racing_writers(
    zk_client_factory: ClientFactory,
) -> None:
    per_writer = 60
    observer_rec = Recorder()
    with (
        SharedCount(zk_client_factory(), "/counts/race", 0) as observer,
        SharedCount(zk_client_factory(), "/counts/race", 0) as w1,
        SharedCount(zk_client_factory(), "/counts/race", 0) as w2,
    ):
        observer.add_listener(observer_rec)
        writer_recs = [Recorder(), Recorder()]
        w1.add_listener(writer_recs[0])
        w2.add_listener(writer_recs[1])
        start = threading.Barrier(2)
        losses = [0, 0]

        def write(count: SharedCount, slot: int) -> None:
            start.wait(10)
            done = 0
            while done < per_writer:
                seen = count.versioned()
                if count.try_set(seen, seen.value + 1):
                    done += 1
                else:
                    losses[slot] += 1

        threads = [threading.Thread(target=write, args=(w, i)) for i, w in enumerate((w1, w2))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(40)
        assert not any(t.is_alive() for t in threads)
        total = 2 * per_writer
        assert w1.refresh().value == total
        for recorder in (observer_rec, *writer_recs):
            wait_until(lambda r=recorder: r.last() == total, "a listener saw the last value")  # type: ignore[misc]
            values = list(recorder.values)
            # Commit order: strictly increasing (every commit added one); values may be skipped.
            assert all(x < y for x, y in itertools.pairwise(values)), values
            assert not any("zk-recipes" not in name for name in recorder.threads)
        assert sum(losses) > 0, "the writers never raced"


def test_a_deleted_and_recreated_node_is_seen_although_its_version_restarts(
    zk_client_factory: ClientFactory,
) -> None:
    writer = zk_client_factory()
    recorder = Recorder()
    with SharedCount(zk_client_factory(), "/counts/recreated", 0) as count:
        count.add_listener(recorder)
        for value in (1, 2, 3):
            writer.set("/counts/recreated", encode(value, 32))
        wait_until(lambda: count.versioned() == VersionedValue(3, 3), "saw version 3")
        writer.delete("/counts/recreated")
        # version 0 again, higher mzxid (parents: the emptied container may be reaped)
        writer.create("/counts/recreated", encode(-50, 32), parents=True)
        wait_until(lambda: count.versioned() == VersionedValue(-50, 0), "saw the new node")
        wait_until(lambda: recorder.last() == -50, "listener saw -50")


def test_a_disconnected_count_catches_up_with_the_last_value(
    zk_private_server: ZooKeeperServer, zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    proxied = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=6.0)
    state = StateRecorder()
    proxied.add_listener(state)
    recorder = Recorder()
    with (
        SharedCount(proxied, "/counts/blip", 0) as count,
        SharedCount(
            zk_client_factory(hosts=zk_private_server.connect_string), "/counts/blip", 0
        ) as writer,
    ):
        count.add_listener(recorder)
        writer.set(1)
        wait_until(lambda: recorder.last() == 1, "listener saw 1")
        zk_proxy.cut()  # kazoo drops the data watch (NONE)
        state.wait_for(ConnectionState.SUSPENDED, timeout=10)
        for value in (2, 3, 4):
            writer.set(value)
        zk_proxy.heal()
        state.wait_for(ConnectionState.RECONNECTED, timeout=10)
        wait_until(lambda: recorder.last() == 4, "listener saw the value written while away")
        writer.set(5)  # the watch is armed again
        wait_until(lambda: recorder.last() == 5, "listener saw 5")
        assert recorder.values == sorted(recorder.values)


def test_corrupted_shared_count_fails_start(zk_client: ZkClient) -> None:
    zk_client.create("/counts/bad", b"\x01", parents=True)
    with pytest.raises(CorruptedValueError) as info:
        SharedCount(zk_client, "/counts/bad", 0).start()
    assert isinstance(info.value, ZkRecipesError)
    assert isinstance(info.value, NodeError)
    assert info.value.path == "/counts/bad"


# -- AtomicLong / AtomicInt ------------------------------------------------------------------


def test_atomic_operations(zk_client: ZkClient) -> None:
    counter = AtomicLong(zk_client, "/atomic/ops")
    assert counter.get() == 0  # no node yet
    assert counter.initialize(5) is True
    assert counter.initialize(6) is False
    assert zk_client.get("/atomic/ops")[0].hex() == "0000000000000005"
    result = counter.increment()
    assert (result.succeeded, result.pre, result.post) == (True, 5, 6)
    assert result.stats.optimistic_tries == 1
    assert result.stats.promoted_tries == 0
    assert counter.decrement().post == 5
    assert counter.add(10).post == 15
    assert counter.subtract(20).post == -5
    assert counter.try_set(42).post == 42
    cas = counter.compare_and_set(42, 43)
    assert (cas.succeeded, cas.pre, cas.post) == (True, 42, 43)
    cas = counter.compare_and_set(42, 44)
    assert (cas.succeeded, cas.pre, cas.post) == (False, 43, 43)
    counter.force_set(-1)
    assert zk_client.get("/atomic/ops")[0].hex() == "ffffffffffffffff"
    # A missing node reads as 0, so compare_and_set(0, x) creates it (Curator's fails).
    fresh = AtomicInt(zk_client, "/atomic/fresh")
    assert fresh.compare_and_set(0, 3).succeeded
    assert zk_client.get("/atomic/fresh")[0].hex() == "00000003"
    fresh.force_set(8)  # existing node
    AtomicInt(zk_client, "/atomic/forced/deep").force_set(9)  # parents made
    assert AtomicInt(zk_client, "/atomic/forced/deep").get() == 9
    assert fresh.get() == 8


def test_overflow_wraps_like_java_and_out_of_range_arguments_raise(zk_client: ZkClient) -> None:
    small = AtomicInt(zk_client, "/atomic/int")
    small.force_set(INT_MAX)
    result = small.increment()
    assert (result.pre, result.post) == (INT_MAX, INT_MIN)
    assert zk_client.get("/atomic/int")[0].hex() == "80000000"
    assert small.decrement().post == INT_MAX
    assert small.add(INT_MAX).post == -2
    big = AtomicLong(zk_client, "/atomic/long")
    big.force_set(LONG_MIN)
    assert big.subtract(1).post == LONG_MAX
    assert big.add(LONG_MIN).post == -1
    with pytest.raises(ValueError, match="32-bit"):
        small.add(INT_MAX + 1)
    with pytest.raises(ValueError, match="64-bit"):
        big.force_set(LONG_MAX + 1)
    with pytest.raises(TypeError):
        big.add(True)
    with pytest.raises(TypeError):
        big.add(1.5)  # type: ignore[arg-type]


def test_corrupted_data_is_a_clear_error(zk_client: ZkClient) -> None:
    zk_client.create("/atomic/bad", b"\x01\x02\x03", parents=True)
    counter = AtomicLong(zk_client, "/atomic/bad")
    with pytest.raises(CorruptedValueError, match="3 byte") as info:
        counter.get()
    assert isinstance(info.value, ZkRecipesError)
    with pytest.raises(CorruptedValueError):
        counter.increment()
    with pytest.raises(CorruptedValueError):
        AtomicInt(zk_client, "/atomic/bad").get()
    assert zk_client.get("/atomic/bad")[0] == b"\x01\x02\x03"  # nothing was written
    zk_client.create("/atomic/empty", b"")
    assert AtomicLong(zk_client, "/atomic/empty").increment().post == 1  # empty reads as 0
    zk_client.create("/atomic/long9", bytes.fromhex("0000000000000007ff"))
    assert AtomicLong(zk_client, "/atomic/long9").get() == 7


def test_configuration_is_checked(zk_client: ZkClient) -> None:
    with pytest.raises(TypeError, match="retry_policy"):
        AtomicLong(zk_client, "/atomic/x", retry_policy=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="promote_to_lock"):
        AtomicLong(zk_client, "/atomic/x", promote_to_lock=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        PromotedToLock("/locks/x", timeout=-1)
    promoted = AtomicLong(zk_client, "/atomic/x", promote_to_lock="/locks/x")
    assert promoted.promote_to_lock == PromotedToLock("/locks/x")


def _incrementer(
    hosts: str, namespace: str, out: str, count: int, promote: bool, start: Any
) -> None:
    """Child process: ``count`` successful increments; log each post value and the stats."""
    with ZkClient(hosts, namespace=namespace, session_timeout=10.0) as client:
        if promote:
            counter = AtomicLong(
                client,
                "/atomic/shared",
                retry_policy=RetryNTimes(1, 0.001),
                promote_to_lock=PromotedToLock("/atomic/lock", RetryNTimes(3, 0.001), timeout=30),
            )
        else:
            counter = AtomicLong(client, "/atomic/shared")
        assert start.wait(30)
        posts: list[int] = []
        failures = promoted = 0
        while len(posts) < count:
            result = counter.increment()
            promoted += result.stats.promoted_tries
            if result.succeeded:
                assert result.post == result.pre + 1
                posts.append(result.post)
            else:
                assert result.post == result.pre
                failures += 1
        with open(out, "w") as log:
            log.write(f"{failures} {promoted}\n")
            log.write(" ".join(map(str, posts)) + "\n")


@pytest.mark.parametrize("promote", [False, True], ids=["optimistic", "promoted"])
def test_eight_processes_add_up_exactly(
    promote: bool, zk_hosts: str, zk_namespace: str, zk_client: ZkClient, tmp_path: Path
) -> None:
    processes, per_process = 8, 250
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    outs = [tmp_path / f"out-{i}.log" for i in range(processes)]
    workers = [
        context.Process(
            target=_incrementer,
            args=(zk_hosts, zk_namespace, str(out), per_process, promote, start),
        )
        for out in outs
    ]
    for worker in workers:
        worker.start()
    time.sleep(1.0)  # let every child connect, so they really contend
    started = time.monotonic()
    start.set()
    for worker in workers:
        worker.join(55)
        assert worker.exitcode == 0
    elapsed = time.monotonic() - started
    total = processes * per_process
    assert AtomicLong(zk_client, "/atomic/shared").get() == total
    posts: list[int] = []
    failures = promoted = 0
    for out in outs:
        head, values = out.read_text().splitlines()
        failed, was_promoted = map(int, head.split())
        failures += failed
        promoted += was_promoted
        posts.extend(map(int, values.split()))
    assert sorted(posts) == list(range(1, total + 1))  # every increment landed exactly once
    if promote:
        assert promoted > 0, "no update was ever promoted to the lock"
    print(f"{total} increments in {elapsed:.1f} s; {failures} failed results; {promoted} promoted")
