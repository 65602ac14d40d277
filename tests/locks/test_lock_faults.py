"""Lock under load and faults: many processes, expiry, partitions, lost replies, failover."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.aio.from_threads import AioLockFromThreads
from zk_recipes import ConnectionState, Lock, LockLost, ZkClient
from zk_recipes.testing import (
    StateRecorder,
    TcpProxy,
    ZooKeeperCluster,
    ZooKeeperServer,
    expire_session,
    wait_until,
)
from zk_recipes.testing.pytest_plugin import ClientFactory

pytestmark = pytest.mark.slow

MakeLock = Callable[[ZkClient, str], Any]
#: The fault tests that apply to both forms run for each: the sync Lock, and the
#: asyncio one driven from threads through a loop of its own (tests/aio/from_threads.py).
LOCKS: dict[str, MakeLock] = {"Lock": Lock, "aio.Lock": AioLockFromThreads}


@pytest.fixture(params=sorted(LOCKS))
def make_lock(request: pytest.FixtureRequest) -> MakeLock:
    return LOCKS[request.param]


def _hammer(hosts: str, namespace: str, log_path: str, rounds: int, ready: object) -> None:
    """Child process: take the lock ``rounds`` times, logging each critical section."""
    with ZkClient(hosts, namespace=namespace, session_timeout=10.0) as client:
        lock = Lock(client, "/hammer")
        ready.wait(30)  # type: ignore[attr-defined]
        with open(log_path, "a", buffering=1) as log:
            for _ in range(rounds):
                with lock:
                    start = time.monotonic_ns()
                    token = lock.fencing_token
                    end = time.monotonic_ns()
                    log.write(f"{os.getpid()} {token} {start} {end}\n")


def test_many_processes_never_overlap_and_tokens_increase(
    zk_hosts: str, zk_namespace: str, tmp_path: Path
) -> None:
    processes, rounds = 8, 200
    log_path = tmp_path / "sections.log"
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    workers = [
        context.Process(target=_hammer, args=(zk_hosts, zk_namespace, str(log_path), rounds, ready))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    time.sleep(1.0)  # let every child connect, so they really contend
    ready.set()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    sections = sorted(
        (int(start), int(end), int(token), pid)
        for pid, token, start, end in (line.split() for line in log_path.read_text().splitlines())
    )
    assert len(sections) == processes * rounds
    for (_, prev_end, prev_token, _), (start, _, token, _) in itertools.pairwise(sections):
        assert start >= prev_end, "two processes were inside the lock at once"
        assert token > prev_token, "fencing tokens must grow with the critical sections"
    assert len({pid for *_, pid in sections}) == processes


def test_server_side_expiry_while_holding(
    make_lock: MakeLock, zk_private_server: ZooKeeperServer, zk_client_factory: ClientFactory
) -> None:
    old_client = zk_client_factory(hosts=zk_private_server.connect_string)
    new_client = zk_client_factory(hosts=zk_private_server.connect_string)
    old, new = make_lock(old_client, "/exp"), make_lock(new_client, "/exp")
    lost_calls: list[object] = []
    old.on_lost(lost_calls.append)
    assert old.acquire()
    old_token = old.fencing_token
    waiter_result: list[bool] = []
    waiter = threading.Thread(target=lambda: waiter_result.append(new.acquire(timeout=10)))
    waiter.start()
    expire_session(old_client)
    assert old.lost.wait(5)
    waiter.join(10)
    assert waiter_result == [True]
    assert new.is_held()
    assert new.fencing_token > old_token
    assert not old.is_held()
    with pytest.raises(LockLost):
        old.check()
    wait_until(lambda: lost_calls == [old], "on_lost ran", 5)
    old.release()  # forgets locally; must not touch the new holder's node
    assert new.is_held()
    assert new_client.exists(new.node or "") is not None
    assert len(new_client.get_children("/exp")) == 1
    new.release()


def test_partitioned_holder_learns_it_lost_before_anyone_else_acquires(
    make_lock: MakeLock,
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
) -> None:
    holder_client = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=3.0)
    other_client = zk_client_factory(hosts=zk_private_server.connect_string)
    holder, other = make_lock(holder_client, "/part"), make_lock(other_client, "/part")
    assert holder.acquire()
    got_at: list[float] = []

    def contend() -> None:
        if other.acquire(timeout=15):
            got_at.append(time.monotonic())

    thread = threading.Thread(target=contend)
    thread.start()
    zk_proxy.blackhole()
    assert holder.lost.wait(10)
    lost_at = time.monotonic()
    thread.join(15)
    assert got_at, "the other client never got the lock"
    assert lost_at < got_at[0], "the old holder must hear LOST before anyone else holds the lock"
    assert not holder.is_held()
    zk_proxy.heal()
    holder.release()
    other.release()


def test_suspended_puts_the_lock_in_doubt_and_reconnect_restores_it(
    make_lock: MakeLock, zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    recorder = StateRecorder()
    client = zk_client_factory(
        hosts=zk_proxy.connect_string, session_timeout=4.0, simulated_expiry_fraction=0.9
    )
    client.add_listener(recorder)
    lock = make_lock(client, "/doubt")
    assert lock.acquire()
    token = lock.fencing_token
    zk_proxy.cut()
    recorder.wait_for(ConnectionState.SUSPENDED, timeout=5)
    deadline = time.monotonic() + 2
    while lock.is_held() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not lock.is_held()
    assert lock.statistics().in_doubt
    zk_proxy.heal()
    recorder.wait_for(ConnectionState.RECONNECTED, timeout=10)
    deadline = time.monotonic() + 5
    while not lock.is_held() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lock.is_held()
    assert lock.fencing_token == token
    assert not lock.lost.is_set()
    lock.release()


def test_lost_reply_during_create_leaves_no_orphan(
    make_lock: MakeLock,
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
) -> None:
    recorder = StateRecorder()
    client = zk_client_factory(
        hosts=zk_proxy.connect_string, session_timeout=4.0, simulated_expiry_fraction=0.95
    )
    observer = zk_client_factory(hosts=zk_private_server.connect_string)
    client.add_listener(recorder)
    client.ensure_path("/orphan")
    lock = make_lock(client, "/orphan")
    mark = recorder.mark()

    def heal_once_suspended() -> None:
        recorder.wait_for(ConnectionState.SUSPENDED, 10, after=mark)
        zk_proxy.heal()

    healer = threading.Thread(target=heal_once_suspended)
    healer.start()
    zk_proxy.drop_replies()
    assert lock.acquire(timeout=15)
    healer.join(10)
    children = observer.get_children("/orphan")
    assert len(children) == 1, f"orphan contender left behind: {children}"
    assert lock.node == f"/orphan/{children[0]}"
    lock.release()
    other = make_lock(observer, "/orphan")
    assert other.acquire(timeout=5)  # the lock still works for everyone
    other.release()


@pytest.mark.cluster
def test_killing_the_holders_server_keeps_the_lock_and_the_queue_order(
    zk_cluster: ZooKeeperCluster, zk_client_factory: ClientFactory
) -> None:
    holder_client = zk_client_factory(
        hosts=zk_cluster.connect_string, session_timeout=4.0, simulated_expiry_fraction=0.9
    )
    holder = Lock(holder_client, "/failover")
    assert holder.acquire()
    order: list[int] = []
    waiters = [
        Lock(zk_client_factory(hosts=zk_cluster.connect_string), "/failover") for _ in range(3)
    ]
    threads = []
    for index, lock in enumerate(waiters):

        def run(lock: Lock = lock, index: int = index) -> None:
            if lock.acquire(timeout=30):
                order.append(index)
                lock.release()

        thread = threading.Thread(target=run)
        thread.start()
        threads.append(thread)
        deadline = time.monotonic() + 5
        while len(holder_client.get_children("/failover")) < index + 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    member = zk_cluster.server_for_session(holder_client.session_id)
    assert member is not None
    session = holder_client.session_id
    member.kill()
    try:
        assert holder_client.wait_connected(10)
        deadline = time.monotonic() + 10
        while not holder.is_held() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert holder.is_held()
        assert holder_client.session_id == session
        assert not holder.lost.is_set()
        holder.release()
        for thread in threads:
            thread.join(30)
        assert order == [0, 1, 2]
    finally:
        member.restart()
        zk_cluster.wait_for_quorum(30)


def test_a_refusal_says_whether_the_lock_was_held_or_zookeeper_unreachable(
    make_lock: MakeLock, zk_server: ZooKeeperServer, zk_client_factory: ClientFactory
) -> None:
    """False means "not acquired"; ``statistics().refusal`` says why, for faces and logs."""
    holder = make_lock(zk_client_factory(), "/refusal")
    assert holder.acquire()
    with zk_server.proxy() as proxy:
        client = zk_client_factory(hosts=proxy.connect_string, session_timeout=3.0)
        asker = make_lock(client, "/refusal")
        assert asker.statistics().refusal is None
        assert not asker.acquire(blocking=False)
        assert asker.statistics().refusal == "held"
        assert not asker.acquire(timeout=0.2)
        assert asker.statistics().refusal == "held"

        proxy.blackhole()
        assert not asker.acquire(blocking=False), "nothing answers: not acquired"
        assert asker.statistics().refusal == "unreachable"

        proxy.heal()
        assert client.wait_connected(15.0)
        holder.release()
        canceller = threading.Timer(0.2, asker.cancel)
        holder.acquire()
        canceller.start()
        assert not asker.acquire(timeout=15.0)
        assert asker.statistics().refusal == "cancelled"
        assert asker.statistics().timeouts == 4
    holder.release()
