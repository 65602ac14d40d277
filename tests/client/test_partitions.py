"""Partitions, for real: the holder hears LOST before anyone else can take what it held.

The docs promise that "a partitioned holder learns it lost its lock before
the server lets anyone else take it". That holds only if the client counts
its silence from the last moment the server provably heard it: here
both directions of a one-way partition are cut while the holder keeps
receiving watch notifications (nodes it watches are rewritten every 0.2 x
the session timeout), which used to push its LOST past the server's expiry.
Then: a connection that flaps for a minute under four contenders leaves at
most one node per holder (no orphan contender), and a client whose kazoo
connection thread dies comes back on its own.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Iterator

import pytest

from zk_recipes import (
    ConnectionState,
    ErrorPolicy,
    LeaderLatch,
    Lock,
    LockLost,
    NoNodeError,
    ProcessClient,
    WatchEvent,
    ZkClient,
)
from zk_recipes.testing import (
    StateRecorder,
    TcpProxy,
    ZooKeeperServer,
    break_connection_thread,
    wait_until,
)
from zk_recipes.testing.pytest_plugin import ClientFactory

pytestmark = pytest.mark.slow

SESSION = 3.0
WATCHED = 12


@contextlib.contextmanager
def _churn(writer: ZkClient, stop_after: float) -> Iterator[list[float]]:
    """Rewrite one of the watched nodes every 0.2 x the session timeout, in turn."""
    stop = threading.Event()
    writes: list[float] = []

    def run() -> None:
        index = 0
        deadline = time.monotonic() + stop_after
        while not stop.wait(0.2 * SESSION) and time.monotonic() < deadline:
            writer.set(f"/watched/{index % WATCHED}", str(index).encode())
            writes.append(time.monotonic())
            index += 1

    thread = threading.Thread(target=run, name="churn")
    thread.start()
    try:
        yield writes
    finally:
        stop.set()
        thread.join(10)


@pytest.mark.parametrize("direction", ["drop_requests", "drop_replies"])
def test_a_partitioned_holder_hears_lost_before_anyone_else_takes_over(
    direction: str,
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
) -> None:
    holder = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=SESSION)
    other = zk_client_factory(hosts=zk_private_server.connect_string, session_timeout=SESSION)
    notified: list[float] = []

    def heard(_event: WatchEvent) -> None:
        notified.append(time.monotonic())

    for index in range(WATCHED):
        other.create(f"/watched/{index}", b"0", parents=True)
        holder.get(f"/watched/{index}", watch=heard)  # one-shot data watches, armed now
    lock = Lock(holder, "/lock")
    assert lock.acquire(timeout=5)
    latch = LeaderLatch(holder, "/latch", "holder", error_policy=ErrorPolicy.SESSION).start()
    assert latch.await_leadership(10)
    recorder = StateRecorder()
    holder.add_listener(recorder)
    lost_seen: list[float] = []

    def note_lost() -> None:
        if lock.lost.wait(30):
            lost_seen.append(time.monotonic())

    threading.Thread(target=note_lost, daemon=True).start()

    getattr(zk_proxy, direction)()
    cut_at = time.monotonic()
    rival_latch = LeaderLatch(other, "/latch", "rival").start()
    try:
        with _churn(other, stop_after=4 * SESSION):
            rival = Lock(other, "/lock")
            assert rival.acquire(timeout=6 * SESSION), "the server never let the rival in"
            rival_at = time.monotonic()
            # Right now, at the rival's first moment: the holder knows.
            with pytest.raises(LockLost):
                lock.check()
            assert not latch.has_leadership()
            assert rival_latch.await_leadership(3 * SESSION)
            assert not latch.has_leadership()
        lost = recorder.wait_for(ConnectionState.LOST, 1)
        assert lost.at < rival_at, (
            f"LOST {lost.at - cut_at:.2f} s after the cut, the rival in after "
            f"{rival_at - cut_at:.2f} s"
        )
        wait_until(lambda: lost_seen, "lock.lost set", 2)
        assert lost_seen[0] < rival_at
        if direction == "drop_requests":
            # The partition let notifications through: the bug needed them to matter.
            assert any(cut_at < t < rival_at for t in notified)
        rival.release()
    finally:
        zk_proxy.heal()
        rival_latch.close()
        latch.close()
        with contextlib.suppress(Exception):
            lock.release()


#: Seconds the connection flaps (a cut, then a heal, each after 0.05-0.3 s).
FLAPPING = 25.0


@pytest.mark.timeout(180)
def test_a_flapping_connection_leaves_at_most_one_node_per_holder(
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
) -> None:
    clients = [
        zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=SESSION) for _ in range(4)
    ]
    observer = zk_client_factory(hosts=zk_private_server.connect_string)
    locks = [Lock(client, "/flap") for client in clients]
    stop = threading.Event()
    acquisitions = [0] * len(locks)
    escaped: list[BaseException] = []

    def contend(index: int) -> None:
        lock = locks[index]
        while not stop.is_set():
            try:
                if lock.acquire(timeout=2):
                    acquisitions[index] += 1
                    time.sleep(0.01)
                    lock.release()
            except Exception as exc:
                escaped.append(exc)
                time.sleep(0.05)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(len(locks))]
    for thread in threads:
        thread.start()
    rng = random.Random(7)
    try:
        deadline = time.monotonic() + FLAPPING  # about 70 cuts and heals
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.05, 0.3))
            zk_proxy.cut()
            time.sleep(rng.uniform(0.05, 0.3))
            zk_proxy.heal()
    finally:
        zk_proxy.heal()
        stop.set()
        for thread in threads:
            thread.join(30)
    assert sum(acquisitions) > 20
    for client in clients:
        assert client.wait_connected(10)
        assert client.wait_for_deletes(10), client.pending_deletes()
    sessions = {client.session_id for client in clients}

    def leftovers() -> list[str]:
        try:
            names = observer.get_children("/flap")
        except NoNodeError:  # emptied, and the CONTAINER reaped: nothing is left
            return []
        return [
            name
            for name in names
            if (stat := observer.exists(f"/flap/{name}")) is not None
            and stat.ephemeral_owner in sessions
        ]

    # Nobody holds anything now: every live session's node is gone (dead sessions'
    # nodes go when the server expires them).
    wait_until(lambda: not leftovers(), "no node of a live session left", 5)
    for lock in locks:
        assert lock.acquire(timeout=10 * SESSION), f"{lock!r} cannot take the lock any more"
        lock.release()
    assert not escaped, escaped[:5]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_client_whose_connection_thread_died_comes_back(
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory(
        hosts=zk_proxy.connect_string, session_timeout=SESSION, connection_timeout=4.0
    )
    latch = LeaderLatch(client, "/revive", "x").start()
    assert latch.await_leadership(10)
    recorder = StateRecorder()
    client.add_listener(recorder)
    break_connection_thread(client)
    zk_proxy.cut()
    recorder.wait_for(ConnectionState.LOST, 10)  # the dead thread's session cannot resume
    zk_proxy.heal()
    healed = time.monotonic()
    back = recorder.wait_for(ConnectionState.RECONNECTED, 10)
    assert back.at - healed < 4.0, "not connected again within the connection timeout"
    assert client.is_started
    assert client.exists("/") is not None
    assert latch.await_leadership(10), "the latch never led again"
    latch.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_process_client_hands_out_a_working_client_after_the_thread_died(
    zk_private_server: ZooKeeperServer, zk_proxy: TcpProxy
) -> None:
    from zk_recipes import ClientSettings

    process = ProcessClient(
        ClientSettings(
            hosts=zk_proxy.connect_string, session_timeout=SESSION, connection_timeout=4.0
        )
    )
    try:
        client = process.get()
        break_connection_thread(client)
        zk_proxy.cut()
        time.sleep(0.3)
        zk_proxy.heal()
        again = process.get(timeout=8)
        assert again.exists("/") is not None
    finally:
        process.close()
