"""Semaphore and SemaphoreMutex: the limit holds under races, leases are all or nothing,
a crashed holder's leases come back at session expiry, a short disconnect keeps them.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from zk_recipes import (
    ConnectionState,
    LockLost,
    LockTimeout,
    NoNodeError,
    RecipeUsageError,
    Semaphore,
    SemaphoreMutex,
    ZkClient,
)
from zk_recipes.testing import StateRecorder, TcpProxy, ZooKeeperServer, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def children(client: ZkClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:  # an emptied directory is a container: reaped at any time
        return []


def test_the_limit_holds_for_racing_clients_and_threads(
    zk_client_factory: ClientFactory,
) -> None:
    limit = 3
    semaphores = [Semaphore(zk_client_factory(), "/race", limit) for _ in range(4)]
    guard = threading.Lock()
    inside = 0
    most = 0
    tokens: list[int] = []
    shared = threading.Event()  # set once two leases are held at once

    def worker(sem: Semaphore) -> None:
        nonlocal inside, most
        for _ in range(6):
            with sem:
                with guard:
                    inside += 1
                    most = max(most, inside)
                    tokens.append(sem.fencing_token)
                    if inside >= 2:
                        shared.set()
                # The first holder keeps its lease until another is inside with it:
                # sharing is shown however slowly the others start.
                shared.wait(10)
                time.sleep(0.02)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=worker, args=(s,)) for s in semaphores for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(50)
    assert not any(t.is_alive() for t in threads)
    assert len(tokens) == 4 * 2 * 6
    assert len(set(tokens)) == len(tokens)  # every lease is a node of its own
    assert most <= limit
    assert most >= 2  # they did share
    assert children(semaphores[0].client, "/race/leases") == []


def _lease_worker(hosts: str, namespace: str, log_path: str, rounds: int, start: Any) -> None:
    """Child process: two threads take a lease ``rounds`` times each and log the intervals."""
    with ZkClient(hosts, namespace=namespace, session_timeout=10.0) as client:
        sem = Semaphore(client, "/procs", 2)
        start.wait(30)
        lines: list[str] = []
        guard = threading.Lock()

        def run() -> None:
            for _ in range(rounds):
                with sem:
                    begin = time.monotonic_ns()
                    time.sleep(0.005)
                    end = time.monotonic_ns()
                with guard:
                    lines.append(f"{os.getpid()} {begin} {end}\n")

        threads = [threading.Thread(target=run) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        with open(log_path, "a") as log:
            log.write("".join(lines))


def test_the_limit_holds_across_processes(zk_hosts: str, zk_namespace: str, tmp_path: Path) -> None:
    processes, rounds = 3, 8
    log_path = tmp_path / "leases.log"
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    workers = [
        context.Process(
            target=_lease_worker, args=(zk_hosts, zk_namespace, str(log_path), rounds, start)
        )
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    time.sleep(1.0)  # let every child connect, so they really contend
    start.set()
    for worker in workers:
        worker.join(50)
        assert worker.exitcode == 0
    intervals = [
        (int(begin), int(end), pid)
        for pid, begin, end in (line.split() for line in log_path.read_text().splitlines())
    ]
    assert len(intervals) == processes * 2 * rounds
    # Sweep the interval ends: never more than 2 leases held at one instant.
    events = sorted(
        itertools.chain(((b, 1) for b, _, _ in intervals), ((e, -1) for _, e, _ in intervals)),
        key=lambda event: (event[0], event[1]),  # an end before a start at the same instant
    )
    held = most = 0
    for _, delta in events:
        held += delta
        most = max(most, held)
    assert most <= 2
    assert len({pid for *_, pid in intervals}) == processes


def test_acquire_leases_is_all_or_nothing(zk_client_factory: ClientFactory) -> None:
    holder = Semaphore(zk_client_factory(), "/all", 5)
    asker = Semaphore(zk_client_factory(), "/all", 5)
    observer = zk_client_factory()
    held = holder.acquire_leases(3)
    assert len(held) == 3
    assert len({lease.fencing_token for lease in held}) == 3

    started = time.monotonic()
    assert asker.acquire_leases(3, timeout=0.5) == []
    assert time.monotonic() - started >= 0.45
    assert asker.acquire_leases(3, blocking=False) == []
    assert not asker.is_held()
    # No lease of ours was left behind, nor a node in the internal mutex.
    assert sorted(children(observer, "/all/leases")) == sorted(
        lease.path.rsplit("/", 1)[1] for lease in held
    )
    assert children(observer, "/all/locks") == []
    assert asker.statistics().timeouts == 2

    # Two fit next to the three: granted together.
    pair = asker.acquire_leases(2, timeout=5)
    assert len(pair) == 2
    assert len(children(observer, "/all/leases")) == 5
    assert not holder.acquire(timeout=0.2)

    # Closing one of the holder's leases lets a waiter for one in.
    waiter_result: list[bool] = []
    waiter = threading.Thread(target=lambda: waiter_result.append(asker.acquire(timeout=10)))
    waiter.start()
    wait_until(lambda: len(children(observer, "/all/leases")) == 6, "waiter's lease pending")
    with held[0]:
        pass  # a Lease is a context manager: closed on exit
    waiter.join(10)
    assert waiter_result == [True]
    held[0].close()  # idempotent
    assert asker.statistics().leases == 3
    for lease in pair + held[1:]:
        lease.close()
    asker.release()
    assert children(observer, "/all/leases") == []


def test_concurrent_releases_each_give_back_a_lease(zk_client: ZkClient) -> None:
    # Like threading.Semaphore: two threads releasing at once give back two leases,
    # never the same one twice.
    semaphore = Semaphore(zk_client, "/double-release", 2)
    for _ in range(10):
        assert semaphore.acquire(timeout=5)
        assert semaphore.acquire(timeout=5)
        start = threading.Barrier(2)

        def release(start: threading.Barrier = start) -> None:
            start.wait(5)
            semaphore.release()

        threads = [threading.Thread(target=release) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert semaphore.leases == []
    assert zk_client.wait_for_deletes(5)
    wait_until(lambda: semaphore.participants() == [], "no lease node left", 5)


def test_a_crashed_holders_leases_return_at_session_expiry(
    zk_client_factory: ClientFactory,
) -> None:
    crashed_client = zk_client_factory()
    crashed = Semaphore(crashed_client, "/crash", 2)
    waiting = Semaphore(zk_client_factory(), "/crash", 2)
    lost: list[Semaphore] = []
    crashed.on_lost(lost.append)
    leases = crashed.acquire_leases(2)
    assert crashed.is_held()
    result: list[list[object]] = []
    waiter = threading.Thread(
        target=lambda: result.append(list(waiting.acquire_leases(2, timeout=20)))
    )
    waiter.start()
    wait_until(lambda: waiting.statistics().waiting == 1, "waiter inside acquire")
    time.sleep(0.2)
    assert result == []

    expire_session(crashed_client)  # the process "crashed": the server drops its session
    waiter.join(20)
    assert len(result) == 1
    assert len(result[0]) == 2
    assert crashed.lost.wait(10)
    wait_until(lambda: lost == [crashed], "on_lost ran", 5)
    assert all(lease.lost for lease in leases)
    assert not crashed.is_held()
    with pytest.raises(LockLost):
        crashed.check()
    crashed.release()  # forgets a lost lease locally; deletes nobody else's node
    crashed.release()
    assert waiting.is_held()
    assert len(waiting.participants()) == 2
    for lease in waiting.leases:
        lease.close()


def test_leases_survive_a_short_disconnect(
    zk_server: ZooKeeperServer, zk_client_factory: ClientFactory
) -> None:
    with TcpProxy(zk_server.host, zk_server.port) as proxy:
        recorder = StateRecorder()
        client = zk_client_factory(
            hosts=proxy.connect_string, session_timeout=4.0, simulated_expiry_fraction=0.9
        )
        client.add_listener(recorder)
        sem = Semaphore(client, "/blip", 1)
        other = Semaphore(zk_client_factory(), "/blip", 1)
        assert sem.acquire()
        token = sem.fencing_token
        proxy.cut()
        recorder.wait_for(ConnectionState.SUSPENDED, timeout=5)
        wait_until(lambda: not sem.is_held(), "lease in doubt while SUSPENDED", 2.0)
        assert sem.statistics().in_doubt == 1
        assert not other.acquire(timeout=0.3)  # the session, and so the lease, lives on
        proxy.heal()
        recorder.wait_for(ConnectionState.RECONNECTED, timeout=10)
        wait_until(sem.is_held, "lease held again after RECONNECTED")
        assert sem.fencing_token == token
        assert not sem.lost.is_set()
        assert not other.acquire(timeout=0.3)
        sem.release()
        assert other.acquire(timeout=5)
        other.release()


def test_semaphore_mutex_excludes_and_is_not_reentrant(
    zk_client_factory: ClientFactory,
) -> None:
    mutexes = [SemaphoreMutex(zk_client_factory(), "/smutex") for _ in range(3)]
    guard = threading.Lock()
    inside = 0
    overlaps = 0

    def worker(mutex: SemaphoreMutex) -> None:
        nonlocal inside, overlaps
        for _ in range(5):
            with mutex:
                with guard:
                    inside += 1
                    overlaps += inside > 1
                time.sleep(0.005)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=worker, args=(m,)) for m in mutexes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(50)
    assert overlaps == 0

    mutex = mutexes[0]
    assert mutex.acquire()
    with pytest.raises(RecipeUsageError, match="not re-entrant"):
        mutex.acquire(timeout=1)
    assert mutex.node is not None
    assert mutex.node.startswith("/smutex/leases/_c_")
    # Any thread may release it (Curator's semantics).
    releaser = threading.Thread(target=mutex.release)
    releaser.start()
    releaser.join(10)
    assert not mutex.is_held()
    assert mutexes[1].acquire(timeout=5)
    with pytest.raises(LockTimeout), mutexes[2].acquired(timeout=0.2):
        pass
    mutexes[1].release()


def test_arguments_and_misuse(zk_client: ZkClient) -> None:
    with pytest.raises(ValueError, match=">= 1"):
        Semaphore(zk_client, "/bad", 0)
    with pytest.raises(TypeError, match="int"):
        Semaphore(zk_client, "/bad", 2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="int"):
        Semaphore(zk_client, "/bad", True)
    sem = Semaphore(zk_client, "/misuse", 2)
    with pytest.raises(ValueError, match="between 1 and max_leases"):
        sem.acquire_leases(3)
    with pytest.raises(ValueError, match="between 1 and max_leases"):
        sem.acquire_leases(0)
    with pytest.raises(RecipeUsageError, match="not held"):
        sem.release()
    with pytest.raises(RecipeUsageError, match="not held"):
        _ = sem.fencing_token
    with pytest.raises(ValueError, match="non-blocking"):
        sem.acquire_leases(1, blocking=False, timeout=1)

    # release() pairs with this thread's acquire(); a lease from acquire_leases stays.
    [kept] = sem.acquire_leases(1)
    assert sem.acquire()
    mine = sem.fencing_token
    assert mine > kept.fencing_token
    assert "holding=2" in repr(sem)
    sem.release()
    assert sem.leases == [kept]
    assert repr(kept).endswith(f"held token={kept.fencing_token}>")
    sem.release()  # nothing from acquire() is left: gives back the other lease
    assert kept.closed
    assert repr(kept).endswith("closed>")
    assert children(zk_client, "/misuse/leases") == []
