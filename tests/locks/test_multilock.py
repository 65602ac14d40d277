"""MultiLock: all or nothing, one global order (no deadlock), mixed members, misuse."""

from __future__ import annotations

import threading
import time

import pytest

from zk_recipes import (
    Lock,
    LockLost,
    MultiLock,
    NoNodeError,
    ReadWriteLock,
    RecipeUsageError,
    RLock,
    Semaphore,
    SemaphoreMutex,
    ZkClient,
)
from zk_recipes.testing import expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def children(client: ZkClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:  # an emptied lock directory is a container: reaped at any time
        return []


def test_all_or_nothing(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()
    observer = zk_client_factory()
    blocker = Lock(zk_client_factory(), "/b")
    assert blocker.acquire()
    a, b, c = Lock(client, "/a"), Lock(client, "/b"), Lock(client, "/c")
    multi = MultiLock([c, b, a])
    assert [lock.path for lock in multi.locks] == ["/a", "/b", "/c"]

    started = time.monotonic()
    assert not multi.acquire(timeout=0.5)
    assert 0.45 <= time.monotonic() - started < 5
    assert not multi.acquire(blocking=False)
    assert not multi.is_held()
    assert not a.is_held()
    assert not c.is_held()
    # Nothing stays held or queued: /a is empty again, /b only has the blocker.
    assert children(observer, "/a") == []
    assert children(observer, "/c") == []
    assert len(children(observer, "/b")) == 1
    assert multi.statistics().timeouts == 2

    blocker.release()
    assert multi.acquire(timeout=5)
    assert multi.is_held()
    tokens = multi.fencing_tokens
    namespace = client.namespace
    assert set(tokens) == {f"{namespace}/a", f"{namespace}/b", f"{namespace}/c"}
    assert tokens[f"{namespace}/a"] == a.fencing_token
    assert multi.fencing_token == max(tokens.values())
    assert not blocker.acquire(timeout=0.2)
    multi.release()
    assert all(children(observer, p) == [] for p in ("/a", "/b", "/c"))


def test_reversed_orders_in_two_threads_never_deadlock(
    zk_client_factory: ClientFactory,
) -> None:
    one, two = zk_client_factory(), zk_client_factory()
    first = MultiLock([Lock(one, "/x"), Lock(one, "/y")])
    second = MultiLock([Lock(two, "/y"), Lock(two, "/x")])  # listed the other way round
    guard = threading.Lock()
    inside = 0
    overlaps = 0
    rounds: list[int] = [0, 0]

    def worker(multi: MultiLock, index: int) -> None:
        nonlocal inside, overlaps
        for _ in range(20):
            assert multi.acquire(timeout=20), "deadlock (or starvation) between MultiLocks"
            with guard:
                inside += 1
                overlaps += inside > 1
            time.sleep(0.002)
            with guard:
                inside -= 1
            multi.release()
            rounds[index] += 1

    threads = [
        threading.Thread(target=worker, args=(first, 0)),
        threading.Thread(target=worker, args=(second, 1)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(45)
    assert rounds == [20, 20]
    assert overlaps == 0


def test_mixed_members_and_a_lost_member(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()
    other = zk_client_factory()
    rw = ReadWriteLock(client, "/rw")
    sem = Semaphore(client, "/sem", 2)
    mutex = SemaphoreMutex(client, "/smutex")
    multi = MultiLock([sem, rw.read_lock, mutex])
    seen: list[MultiLock] = []
    multi.on_lost(seen.append)
    with multi:
        assert rw.read_lock.is_held()
        assert sem.is_held()
        assert mutex.is_held()
        assert len(multi.fencing_tokens) == 3
        # Readers share; the semaphore has a lease left; the mutex is taken.
        assert ReadWriteLock(other, "/rw").read_lock.acquire(timeout=5)
        assert Semaphore(other, "/sem", 2).acquire(timeout=5)
        assert not SemaphoreMutex(other, "/smutex").acquire(timeout=0.2)
    assert not multi.is_held()

    assert multi.acquire(timeout=5)
    expire_session(client)
    assert multi.lost.wait(10)
    wait_until(lambda: seen, "on_lost ran", 5)  # once per lost member at most
    assert all(entry is multi for entry in seen)
    assert not multi.is_held()
    with pytest.raises(LockLost):
        multi.check()
    multi.release()
    assert "unlocked" in repr(multi)


def test_misuse(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()
    a, b = Lock(client, "/a"), RLock(client, "/b")
    with pytest.raises(ValueError, match="at least one"):
        MultiLock([])
    with pytest.raises(ValueError, match="same path"):
        MultiLock([a, Lock(client, "/a")])
    with pytest.raises(TypeError, match="lock-like"):
        MultiLock([a, object()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="cannot be MultiLocks"):
        MultiLock([MultiLock([a])])  # type: ignore[list-item]
    multi = MultiLock([a, b])
    with pytest.raises(RecipeUsageError, match="not held"):
        multi.release()
    with pytest.raises(RecipeUsageError, match="not held"):
        _ = multi.fencing_tokens
    assert multi.acquire()
    with pytest.raises(RecipeUsageError, match="not re-entrant"):
        multi.acquire(timeout=1)
    errors: list[BaseException] = []

    def release_elsewhere() -> None:
        try:
            multi.release()
        except RecipeUsageError as exc:
            errors.append(exc)

    thread = threading.Thread(target=release_elsewhere)
    thread.start()
    thread.join(10)
    assert len(errors) == 1
    assert multi.is_held()
    multi.release()

    # A member this thread holds on its own: a non-re-entrant Lock refuses, and the
    # MultiLock gives back what it took before the refusal.
    assert b.acquire()
    lone = Lock(client, "/c")
    assert lone.acquire()
    with pytest.raises(RecipeUsageError, match="not re-entrant"):
        MultiLock([b, lone]).acquire(timeout=1)
    b.release()  # the MultiLock's re-entry into b was undone: one release frees it
    assert not b.is_held()
    lone.release()
