"""One contract, every lock-like recipe: exclusion, FIFO, non-blocking, timeouts, misuse.

Each entry of FACTORIES makes a fresh lock-like object for (client, path):
every one is a ``zk_recipes.LockLike`` — ``acquire(blocking=True,
timeout=None) -> bool``, ``release()``, ``with``, ``acquired(timeout)``,
``is_held()``, ``check()``, ``fencing_token``, ``lost``, ``on_lost``,
``cancel()`` and ``contenders()``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import pytest

from tests.aio.from_threads import (
    AioLockFromThreads,
    AioMultiLockFromThreads,
    AioSemaphoreMutexFromThreads,
    AioWriteLockFromThreads,
)
from zk_recipes import (
    ClientStateError,
    Lock,
    LockLike,
    LockTimeout,
    MultiLock,
    ReadWriteLock,
    RecipeUsageError,
    RLock,
    Semaphore,
    SemaphoreMutex,
    ZkClient,
)
from zk_recipes.testing import wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

Factory = Callable[[ZkClient, str], LockLike]

FACTORIES: dict[str, Factory] = {
    "Lock": Lock,
    "RLock": RLock,
    # The read half is shared, so only the write half is an exclusive lock.
    "ReadWriteLock.write_lock": lambda client, path: ReadWriteLock(client, path).write_lock,
    "SemaphoreMutex": SemaphoreMutex,
    "Semaphore(1)": lambda client, path: Semaphore(client, path, 1),
    "MultiLock([Lock])": lambda client, path: MultiLock([Lock(client, path)]),
    # The asyncio form, driven from threads through a loop of its own (its cancel()
    # cancels the acquires' tasks): one contract for both APIs.
    "aio.Lock": AioLockFromThreads,
    "aio.ReadWriteLock.write_lock": AioWriteLockFromThreads,
    "aio.SemaphoreMutex": AioSemaphoreMutexFromThreads,
    "aio.MultiLock([aio.Lock])": AioMultiLockFromThreads,
}


@pytest.fixture(params=sorted(FACTORIES))
def make_lock(request: pytest.FixtureRequest) -> Factory:
    return FACTORIES[request.param]


def test_mutual_exclusion_between_clients(
    make_lock: Factory, zk_client_factory: ClientFactory
) -> None:
    holders = [make_lock(zk_client_factory(), "/contract") for _ in range(3)]
    inside = 0
    overlaps = 0
    tokens: list[int] = []
    guard = threading.Lock()

    def worker(lock: LockLike) -> None:
        nonlocal inside, overlaps
        for _ in range(10):
            with lock:
                with guard:
                    inside += 1
                    overlaps += inside > 1
                    tokens.append(lock.fencing_token)
                time.sleep(0.001)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=worker, args=(lock,)) for lock in holders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert overlaps == 0
    assert len(tokens) == 30
    assert tokens == sorted(tokens)  # fencing tokens only grow
    assert len(set(tokens)) == 30


def test_fifo_fairness(make_lock: Factory, zk_client_factory: ClientFactory) -> None:
    first = make_lock(zk_client_factory(), "/fifo")
    assert first.acquire()
    order: list[int] = []
    waiters = [make_lock(zk_client_factory(), "/fifo") for _ in range(4)]
    threads = []
    for index, lock in enumerate(waiters):

        def run(lock: LockLike = lock, index: int = index) -> None:
            with lock:
                order.append(index)

        thread = threading.Thread(target=run)
        thread.start()
        threads.append(thread)
        _wait_for_queue(first, index + 2)  # queue them in a known order
    first.release()
    for thread in threads:
        thread.join(30)
    assert order == [0, 1, 2, 3]


def _wait_for_queue(lock: LockLike, length: int) -> None:
    deadline = time.monotonic() + 5
    while len(first_client_children(lock)) < length:
        assert time.monotonic() < deadline, "waiters did not queue up"
        time.sleep(0.01)


def first_client_children(lock: LockLike) -> list[str]:
    """Everyone queued for ``lock`` (holder included), once each."""
    return [contender.path for contender in lock.contenders()]


def test_non_blocking_and_timeout(make_lock: Factory, zk_client_factory: ClientFactory) -> None:
    holder = make_lock(zk_client_factory(), "/nb")
    other_client = zk_client_factory()
    other = make_lock(other_client, "/nb")
    assert holder.acquire(blocking=False)
    assert holder.is_held()
    assert not other.acquire(blocking=False)
    started = time.monotonic()
    assert not other.acquire(timeout=0.5)
    elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 0.5 + 0.5  # honoured to within about one round trip
    with pytest.raises(LockTimeout), other.acquired(timeout=0.2):
        pass
    assert not other.is_held()
    # Failed attempts leave no node behind.
    assert len(first_client_children(holder)) == 1
    holder.release()
    assert other.acquire(timeout=5)
    other.release()


def test_an_infinite_timeout_waits_as_long_as_it_takes(
    make_lock: Factory, zk_client_factory: ClientFactory
) -> None:
    """``timeout=math.inf`` is None's "forever", not an OverflowError from the OS's waits."""
    holder = make_lock(zk_client_factory(), "/inf")
    other = make_lock(zk_client_factory(), "/inf")
    assert holder.acquire()
    outcome: list[object] = []

    def wait() -> None:
        outcome.append(other.acquire(timeout=math.inf))
        other.release()  # by the thread that took it (MultiLock's rule)

    waiter = threading.Thread(target=wait)
    waiter.start()
    wait_until(lambda: len(first_client_children(holder)) == 2, "the waiter queues")
    assert outcome == []
    holder.release()
    waiter.join(10)
    assert outcome == [True]


def test_timeout_spans_predecessor_changes(
    make_lock: Factory, zk_client_factory: ClientFactory
) -> None:
    # kazoo restarts the full timeout at each new predecessor (2 s became 3.5 s).
    first = make_lock(zk_client_factory(), "/span")
    second = make_lock(zk_client_factory(), "/span")
    third = make_lock(zk_client_factory(), "/span")
    assert first.acquire()
    second_result: list[bool] = []
    thread = threading.Thread(target=lambda: second_result.append(second.acquire(timeout=0.6)))
    thread.start()
    _wait_for_queue(first, 2)
    started = time.monotonic()
    # third waits on second; second gives up at 0.6 s, so third then waits on first.
    assert not third.acquire(timeout=1.2)
    elapsed = time.monotonic() - started
    thread.join(10)
    assert second_result == [False]
    assert 1.15 <= elapsed < 1.2 + 0.5
    assert len(first_client_children(first)) == 1
    first.release()


def test_misuse_errors(make_lock: Factory, zk_client: ZkClient) -> None:
    lock = make_lock(zk_client, "/misuse")
    with pytest.raises(RecipeUsageError, match="not held"):
        lock.release()
    with pytest.raises(RecipeUsageError, match="not held"):
        _ = lock.fencing_token
    with pytest.raises(ValueError, match="non-blocking"):
        lock.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError, match=">= 0"):
        lock.acquire(timeout=-5)
    with pytest.raises(TypeError, match="seconds"):
        lock.acquire(timeout="1")  # type: ignore[arg-type]


def test_lock_on_closed_client_fails_fast(
    make_lock: Factory, zk_client_factory: ClientFactory
) -> None:
    client = zk_client_factory()
    lock = make_lock(client, "/closed")
    client.close()
    with pytest.raises(ClientStateError, match="closed"):
        lock.acquire(timeout=1)


def test_release_from_context_even_on_error(
    make_lock: Factory, zk_client_factory: ClientFactory
) -> None:
    lock = make_lock(zk_client_factory(), "/ctx")

    def fail_inside() -> None:
        with lock:
            assert lock.is_held()
            raise KeyError("boom")

    with pytest.raises(KeyError):
        fail_inside()
    assert not lock.is_held()
    other = make_lock(zk_client_factory(), "/ctx")
    assert other.acquire(blocking=False)
    other.release()


def test_a_waiter_wakes_when_its_client_is_closed(
    make_lock: Factory, zk_client_factory: ClientFactory
) -> None:
    holder = make_lock(zk_client_factory(), "/closing")
    waiter_client = zk_client_factory()
    waiter = make_lock(waiter_client, "/closing")
    assert holder.acquire()
    outcome: list[BaseException | bool] = []

    def wait() -> None:
        try:
            outcome.append(waiter.acquire(timeout=30))
        except BaseException as exc:  # the outcome is what we assert on
            outcome.append(exc)

    thread = threading.Thread(target=wait)
    thread.start()
    _wait_for_queue(holder, 2)
    started = time.monotonic()
    waiter_client.close()
    thread.join(10)
    assert not thread.is_alive()
    assert time.monotonic() - started < 5
    assert len(outcome) == 1
    assert isinstance(outcome[0], ClientStateError)
    assert len(first_client_children(holder)) == 1  # the waiter's node went with its session
    holder.release()


def test_every_recipe_is_a_lock_like(make_lock: Factory, zk_client: ZkClient) -> None:
    # mypy checks FACTORIES against the LockLike protocol; this checks the objects.
    lock = make_lock(zk_client, "/protocol")
    for name in (
        "acquire",
        "release",
        "is_held",
        "check",
        "fencing_token",
        "on_lost",
        "cancel",
        "contenders",
        "acquired",
        "__enter__",
        "__exit__",
    ):
        assert hasattr(type(lock), name), name
    assert isinstance(lock.lost, threading.Event)


def test_cancel_ends_every_waiting_acquire_at_once(
    make_lock: Factory, zk_client_factory: ClientFactory
) -> None:
    holder = make_lock(zk_client_factory(), "/cancel")
    waiter = make_lock(zk_client_factory(), "/cancel")
    assert holder.acquire(timeout=5)
    results: list[bool] = []
    calling = threading.Semaphore(0)

    def wait() -> None:
        calling.release()
        results.append(waiter.acquire(timeout=30))

    threads = [threading.Thread(target=wait) for _ in range(2)]
    for thread in threads:
        thread.start()
    for _ in threads:  # both threads are calling acquire (not still starting) ...
        assert calling.acquire(timeout=5)
    _wait_for_queue(holder, 2)  # ... and a waiter's node is queued
    cancelled_at = time.monotonic()
    waiter.cancel()
    for thread in threads:
        thread.join(5)
    assert results == [False, False]
    assert time.monotonic() - cancelled_at < 1.0, "cancel() must end the waits at once"
    assert len(first_client_children(holder)) == 1, "a cancelled waiter left its node"
    # Only the waits in progress were cancelled.
    holder.release()
    assert waiter.acquire(timeout=5)
    waiter.release()
