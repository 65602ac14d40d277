"""ReadWriteLock: readers share, writers exclude, FIFO without starvation, downgrade, upgrade.

Every test runs against the real server, with one client (one session) per
participant unless it is about threads of one process. Waits are bounded and
event-driven; the few "still not acquired" checks give the wrong outcome
time to happen rather than asserting timings.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from zk_recipes import LockLost, NoNodeError, ReadWriteLock, RecipeUsageError, ZkClient
from zk_recipes._locks.rwlock import READ_TOKEN, WRITE_TOKEN
from zk_recipes.testing import expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def queue_length(client: ZkClient, path: str) -> int:
    try:
        return len(client.get_children(path))
    except NoNodeError:  # an emptied lock directory is a container: reaped at any time
        return 0


def in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    thread.start()
    return thread, result


def test_readers_share_across_clients_and_threads(zk_client_factory: ClientFactory) -> None:
    locks = [ReadWriteLock(zk_client_factory(), "/rw") for _ in range(3)]
    for rw in locks:
        assert rw.read_lock.acquire(timeout=5)
    assert all(rw.read_lock.is_held() for rw in locks)
    contenders = locks[0].contenders()
    assert len(contenders) == 3
    assert all(c.is_holder for c in contenders)
    assert all(READ_TOKEN in c.path for c in contenders)

    # Two threads of one process share one object's read lock, each with its own node.
    shared = locks[0]
    barrier = threading.Barrier(2, timeout=10)
    tokens: list[int] = []

    def reader() -> None:
        with shared.read_lock:
            tokens.append(shared.read_lock.fencing_token)
            barrier.wait()  # both inside at once, or this times out

    other, _ = in_thread(reader)
    with shared.read_lock:  # re-entrant for this thread: no new node
        assert queue_length(shared.client, "/rw") in (3, 4)
        barrier.wait()
    other.join(10)
    assert len(tokens) == 1
    assert tokens[0] != shared.read_lock.fencing_token  # the other thread had its own node
    for rw in locks:
        rw.read_lock.release()
    assert queue_length(locks[0].client, "/rw") == 0


def test_writer_excludes_readers_and_writers(zk_client_factory: ClientFactory) -> None:
    writer = ReadWriteLock(zk_client_factory(), "/rw")
    reader = ReadWriteLock(zk_client_factory(), "/rw")
    other_writer = ReadWriteLock(zk_client_factory(), "/rw")
    assert writer.write_lock.acquire()
    assert not reader.read_lock.acquire(blocking=False)
    assert not reader.read_lock.acquire(timeout=0.3)
    assert not other_writer.write_lock.acquire(timeout=0.3)
    assert queue_length(writer.client, "/rw") == 1  # the failed attempts left nothing
    [holder] = writer.contenders()
    assert holder.is_holder
    assert WRITE_TOKEN in holder.path
    writer.write_lock.release()

    # A reader excludes a writer too.
    assert reader.read_lock.acquire(timeout=5)
    assert not other_writer.write_lock.acquire(timeout=0.3)
    reader.read_lock.release()
    assert other_writer.write_lock.acquire(timeout=5)
    other_writer.write_lock.release()


def test_reader_queued_behind_a_writer_waits_for_it(zk_client_factory: ClientFactory) -> None:
    first_reader = ReadWriteLock(zk_client_factory(), "/fifo")
    writer = ReadWriteLock(zk_client_factory(), "/fifo")
    late_reader = ReadWriteLock(zk_client_factory(), "/fifo")
    observer = zk_client_factory()
    order: list[str] = []
    writer_in = threading.Event()
    writer_may_leave = threading.Event()

    assert first_reader.read_lock.acquire()

    def write() -> None:
        with writer.write_lock:
            order.append("writer")
            writer_in.set()
            writer_may_leave.wait(10)

    def read_late() -> None:
        with late_reader.read_lock:
            order.append("late reader")

    writing, _ = in_thread(write)
    wait_until(lambda: queue_length(observer, "/fifo") == 2, "writer queued")
    reading, _ = in_thread(read_late)
    wait_until(lambda: queue_length(observer, "/fifo") == 3, "late reader queued")
    # The read lock is held by a reader, yet the late reader waits: a writer is ahead.
    time.sleep(0.3)
    assert order == []
    assert [c.is_holder for c in first_reader.contenders()] == [True, False, False]

    first_reader.read_lock.release()
    assert writer_in.wait(10)
    time.sleep(0.2)
    assert order == ["writer"]  # the late reader still waits for the writer
    writer_may_leave.set()
    writing.join(10)
    reading.join(10)
    assert order == ["writer", "late reader"]


def test_a_stream_of_readers_does_not_starve_a_writer(
    zk_client_factory: ClientFactory,
) -> None:
    readers = [ReadWriteLock(zk_client_factory(), "/stream") for _ in range(3)]
    writer = ReadWriteLock(zk_client_factory(), "/stream")
    stop = threading.Event()
    guard = threading.Lock()
    reading = 0
    overlap_with_writer = 0
    writer_inside = False
    reads = 0

    def keep_reading(rw: ReadWriteLock) -> None:
        nonlocal reading, overlap_with_writer, reads
        while not stop.is_set():
            with rw.read_lock:
                with guard:
                    reading += 1
                    reads += 1
                    overlap_with_writer += writer_inside
                time.sleep(0.03)  # overlapping readers: the read lock is never free
                with guard:
                    reading -= 1

    threads = [threading.Thread(target=keep_reading, args=(rw,)) for rw in readers]
    for thread in threads:
        thread.start()
    wait_until(lambda: reads >= 6, "readers are streaming")
    started = time.monotonic()
    acquired = writer.write_lock.acquire(timeout=20)
    waited = time.monotonic() - started
    with guard:
        writer_inside = True
        readers_inside = reading
    time.sleep(0.1)
    with guard:
        writer_inside = False
    writer.write_lock.release()
    stop.set()
    for thread in threads:
        thread.join(10)
    assert acquired, "the writer starved behind a stream of readers"
    assert waited < 20
    assert readers_inside == 0
    assert overlap_with_writer == 0


def test_downgrade_keeps_a_queued_writer_out(zk_client_factory: ClientFactory) -> None:
    rw = ReadWriteLock(zk_client_factory(), "/down")
    other = ReadWriteLock(zk_client_factory(), "/down")
    observer = zk_client_factory()
    assert rw.write_lock.acquire()
    write_token = rw.write_lock.fencing_token
    write_name = (rw.write_lock.node or "").rsplit("/", 1)[1]

    def write_once() -> bool:
        if not other.write_lock.acquire(timeout=30):
            return False
        other.write_lock.release()
        return True

    waiting, result = in_thread(write_once)
    wait_until(lambda: queue_length(observer, "/down") == 2, "writer queued")

    assert rw.read_lock.acquire(blocking=False)  # granted at once: we hold the write lock
    read_name = (rw.read_lock.node or "").rsplit("/", 1)[1]
    # Curator 5.5's layout: an EPHEMERAL read node carrying the writer's sequence number.
    assert read_name.startswith("_c_")
    assert read_name.endswith(READ_TOKEN + write_name.rsplit(WRITE_TOKEN, 1)[1])
    stat = observer.exists(f"/down/{read_name}")
    assert stat is not None
    assert stat.ephemeral_owner == rw.client.session_id
    assert rw.read_lock.fencing_token > write_token

    rw.write_lock.release()
    assert rw.read_lock.is_held()
    time.sleep(0.5)  # give the queued writer every chance to slip in
    assert result == []
    assert waiting.is_alive()
    holders = [c.path for c in rw.contenders() if c.is_holder]
    assert holders == [f"/down/{read_name}"]

    rw.read_lock.release()
    waiting.join(10)
    assert result == [True]


def test_upgrade_raises_and_write_is_reentrant(zk_client_factory: ClientFactory) -> None:
    rw = ReadWriteLock(zk_client_factory(), "/up")
    assert rw.read_lock.acquire()
    with pytest.raises(RecipeUsageError, match="upgrad"):
        rw.write_lock.acquire(timeout=1)
    assert rw.read_lock.is_held()
    assert rw.read_lock.acquire()  # re-entrant per thread: same node
    assert queue_length(rw.client, "/up") == 1
    rw.read_lock.release()
    rw.read_lock.release()
    with pytest.raises(RecipeUsageError, match="not held"):
        rw.read_lock.release()

    # Write, then read (downgrade), then write again: re-entrant, no deadlock.
    with rw.write_lock, rw.read_lock, rw.write_lock:
        assert queue_length(rw.client, "/up") == 2
    assert queue_length(rw.client, "/up") == 0

    # Only the holding thread releases a half.
    rw.write_lock.acquire()
    errors: list[BaseException] = []

    def release_elsewhere() -> None:
        try:
            rw.write_lock.release()
        except RecipeUsageError as exc:
            errors.append(exc)
        try:
            rw.read_lock.release()
        except RecipeUsageError as exc:
            errors.append(exc)

    thread, _ = in_thread(release_elsewhere)
    thread.join(10)
    assert len(errors) == 2
    rw.write_lock.release()


def test_fencing_tokens_increase_across_halves_and_clients(
    zk_client_factory: ClientFactory,
) -> None:
    locks = [ReadWriteLock(zk_client_factory(), "/tokens") for _ in range(2)]
    tokens: list[int] = []
    for rw in locks * 3:
        for half in (rw.write_lock, rw.read_lock):
            with half:
                tokens.append(half.fencing_token)
    assert len(tokens) == 12
    assert tokens == sorted(set(tokens))


def test_a_lost_session_loses_the_read_lock(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()
    rw = ReadWriteLock(client, "/lost")
    writer = ReadWriteLock(zk_client_factory(), "/lost")
    seen: list[object] = []
    rw.read_lock.on_lost(seen.append)
    assert rw.read_lock.acquire()
    expire_session(client)
    assert rw.read_lock.lost.wait(10)
    wait_until(lambda: seen == [rw.read_lock], "on_lost ran", 5)
    assert not rw.read_lock.is_held()
    with pytest.raises(LockLost):
        rw.read_lock.check()
    assert writer.write_lock.acquire(timeout=10)  # the reader's node went with its session
    rw.read_lock.release()  # forgets locally; never touches the writer's node
    assert writer.write_lock.is_held()
    writer.write_lock.release()
    assert "LOST" not in repr(rw.read_lock)


def test_downgrade_is_refused_once_the_write_lock_was_lost(
    zk_client_factory: ClientFactory,
) -> None:
    # A read node made at a lost writer's place would sort ahead of the new
    # writer and be granted at once: a reader and a writer together.
    client, other = zk_client_factory(), zk_client_factory()
    rw = ReadWriteLock(client, "/lost-writer")
    assert rw.write_lock.acquire(timeout=5)
    expire_session(client)
    rival = ReadWriteLock(other, "/lost-writer")
    assert rival.write_lock.acquire(timeout=10)
    # Whether the client has heard of the expiry yet or not, the downgrade is refused.
    with pytest.raises(LockLost, match="cannot be downgraded"):
        rw.read_lock.acquire(timeout=1)
    assert not any(READ_TOKEN in name for name in other.get_children("/lost-writer"))
    assert rival.write_lock.is_held()
    rw.write_lock.release()
    rival.write_lock.release()


def test_downgrade_is_refused_when_the_writers_node_is_gone(
    zk_client_factory: ClientFactory,
) -> None:
    # The session lives, but someone deleted the writer's node: the read node is
    # made in one multi with a check of the writer's node, so it never appears.
    client, admin = zk_client_factory(), zk_client_factory()
    rw = ReadWriteLock(client, "/deleted-writer")
    assert rw.write_lock.acquire(timeout=5)
    node = rw.write_lock.node
    assert node is not None
    admin.delete(node)
    with pytest.raises(LockLost, match="its node or its session is gone"):
        rw.read_lock.acquire(timeout=1)
    wait_until(
        lambda: not any(READ_TOKEN in name for name in admin.get_children("/deleted-writer")),
        "no read node",
        2,
    )
    rw.write_lock.release()
