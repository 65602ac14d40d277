"""One validity model for every hold: a hold is ours only while its session life lasts.

Each test here was a way to miss a loss, written against real servers: the
holder learns of a loss however the loss reaches it — in the window between
taking a node and following it, by close(), in a burst of expiries, by a
state change queued for an earlier hold — and nothing escapes acquire() on
the way.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from zk_recipes import (
    ConnectionState,
    CreateMode,
    ErrorPolicy,
    LeaderSelector,
    LeadershipContext,
    Lease,
    Lock,
    LockLost,
    RLock,
    Semaphore,
    StateChange,
    ZkClient,
)
from zk_recipes._internals.contenders import Entry
from zk_recipes._internals.holding import Hold, apply_change, taken_now
from zk_recipes.testing import (
    StateRecorder,
    TcpProxy,
    ZooKeeperServer,
    expire_session,
    wait_until,
)
from zk_recipes.testing.pytest_plugin import ClientFactory

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def _lose_before_following(
    client: ZkClient,
    proxy: TcpProxy,
    is_it: Callable[[object], bool],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[None]:
    """Partition ``client`` and wait for LOST right before the listener ``is_it`` is added.

    That is the window between taking a node and following it: a LOST
    published there reaches no listener of the hold; the hold must notice
    all the same.
    """
    real_add = client.add_listener

    def add_listener(listener: Any) -> None:
        if is_it(getattr(listener, "__self__", None)):
            monkeypatch.setattr(client, "add_listener", real_add)
            proxy.blackhole()
            wait_until(lambda: client.state is ConnectionState.LOST, "LOST in the window", 10)
        real_add(listener)

    monkeypatch.setattr(client, "add_listener", add_listener)
    try:
        yield
    finally:
        proxy.heal()


@pytest.mark.parametrize("make", [Lock, RLock], ids=["Lock", "RLock"])
def test_a_loss_between_taking_the_lock_and_following_it_is_caught(
    make: type[Lock] | type[RLock],
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = zk_client_factory(hosts=zk_proxy.connect_string)
    other = zk_client_factory(hosts=zk_private_server.connect_string)
    lock = make(client, "/window")
    with _lose_before_following(client, zk_proxy, lambda o: o is lock._holds, monkeypatch):
        assert lock.acquire(timeout=5)
        assert lock.lost.wait(2), "the hold's loss went unnoticed"
        assert not lock.is_held()
        with pytest.raises(LockLost):
            lock.check()
        # The server expires the session and lets someone else in, while we still know.
        rival = Lock(other, "/window")
        assert rival.acquire(timeout=15)
        with pytest.raises(LockLost):
            lock.check()
        lock.release()  # forgets it locally; never deletes the rival's node
        assert rival.is_held()
        rival.release()


def test_a_loss_between_taking_a_lease_and_following_it_is_caught(
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = zk_client_factory(hosts=zk_proxy.connect_string)
    other = zk_client_factory(hosts=zk_private_server.connect_string)
    semaphore = Semaphore(client, "/sem-window", 1)
    with _lose_before_following(client, zk_proxy, lambda o: o is semaphore._holds, monkeypatch):
        leases = semaphore.acquire_leases(1, timeout=5)
        assert leases
        assert semaphore.lost.wait(2)
        assert leases[0].lost
        assert not semaphore.is_held()
        with pytest.raises(LockLost):
            semaphore.check()
        assert Semaphore(other, "/sem-window", 1).acquire_leases(1, timeout=15)
        leases[0].close()


def test_a_session_selector_never_leads_on_a_mutex_lost_in_that_window(
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = zk_client_factory(hosts=zk_proxy.connect_string)
    contexts: list[LeadershipContext] = []
    started = threading.Event()

    def take_leadership(ctx: LeadershipContext) -> None:
        contexts.append(ctx)
        started.set()
        ctx.cancelled.wait(30)

    selector = LeaderSelector(
        client, "/sel-window", take_leadership, error_policy=ErrorPolicy.SESSION
    )
    with _lose_before_following(
        client, zk_proxy, lambda o: o is selector._mutex._holds, monkeypatch
    ):
        selector.start()
        wait_until(lambda: selector._mutex._hold is not None, "the mutex taken", 10)
        wait_until(lambda: client.state is ConnectionState.LOST, "LOST", 10)
        # Either the term never began, or it was cancelled at once: never leading.
        time.sleep(0.3)
        assert not selector.has_leadership()
        if started.is_set():
            assert contexts[0].cancelled.wait(1)
    selector.close()


# ---------------------------------------------------------------- close() tells every hold


def test_close_ends_every_hold_before_the_server_hands_it_on(
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory()
    other = zk_client_factory()
    lock = Lock(client, "/closing/lock")
    semaphore = Semaphore(client, "/closing/sem", 1)
    assert lock.acquire(timeout=5)
    leases = semaphore.acquire_leases(1, timeout=5)
    leading = threading.Event()
    cancelled_at: list[float] = []

    def take_leadership(ctx: LeadershipContext) -> None:
        leading.set()
        ctx.cancelled.wait(30)
        cancelled_at.append(time.monotonic())

    selector = LeaderSelector(client, "/closing/leader", take_leadership).start()
    assert leading.wait(10)
    recorder = StateRecorder()
    client.add_listener(recorder)
    closed_at = time.monotonic()
    client.close()
    # At once, on the caller's thread: nothing is held any more.
    assert not lock.is_held()
    with pytest.raises(LockLost, match="client was closed"):
        lock.check()
    assert leases[0].lost
    assert not semaphore.is_held()
    assert not selector.has_leadership()
    assert client.state is ConnectionState.CLOSED
    assert recorder.wait_for(ConnectionState.CLOSED, 2)
    assert lock.lost.wait(1)
    assert semaphore.lost.wait(1)
    wait_until(lambda: cancelled_at, "take_leadership returned", 2)
    assert cancelled_at[0] - closed_at < 1.0, "a leading selector must be cancelled within 1 s"
    # The server dropped our nodes: others get in, and the old holders only forget.
    rival = Lock(other, "/closing/lock")
    assert rival.acquire(timeout=5)
    lock.release()
    leases[0].close()
    selector.close()
    assert rival.is_held()
    rival.release()


def test_close_gives_a_pending_guaranteed_delete_its_chance_without_spinning(
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory(hosts=zk_proxy.connect_string)
    observer = zk_client_factory(hosts=zk_private_server.connect_string)
    client.create("/keep-or-go", b"persistent")
    recorder = StateRecorder()
    client.add_listener(recorder)
    zk_proxy.cut()
    recorder.wait_for(ConnectionState.SUSPENDED, 5)
    client.delete("/keep-or-go", guaranteed=True)  # queued: the connection is down
    assert client.pending_deletes() == ["/keep-or-go"]
    zk_proxy.heal()
    cpu_before, started = time.process_time(), time.monotonic()
    client.close()
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_before
    assert observer.exists("/keep-or-go") is None, "the pending delete was never attempted"
    assert elapsed < 1.5
    assert cpu < 0.5, f"close() burnt {cpu:.2f} s of CPU waiting for the delete"


# ---------------------------------------------------------------- expiry storms


def test_every_lease_held_at_an_expiry_ends_lost(
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory()
    semaphore = Semaphore(client, "/storm", 3)
    recorder = StateRecorder()
    client.add_listener(recorder)
    stop = threading.Event()
    done: list[tuple[Lease, float, float, bool]] = []  # lease, taken, given back, lost flag
    errors: list[BaseException] = []

    def worker() -> None:
        rng = random.Random()
        while not stop.is_set():
            try:
                leases = semaphore.acquire_leases(1, timeout=2)
                if not leases:
                    continue
                taken = time.monotonic()
                time.sleep(rng.uniform(0.1, 0.8))
                lost_flag = leases[0]._hold.lost  # set by the listener, not computed
                given_back = time.monotonic()
                leases[0].close()
                done.append((leases[0], taken, given_back, lost_flag))
            except Exception as exc:
                errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    losses: list[float] = []
    try:
        for _ in range(10):
            time.sleep(0.6)
            mark = recorder.mark()
            expire_session(client)
            losses.append(recorder.wait_for(ConnectionState.LOST, 10, after=mark).at)
            recorder.wait_for(ConnectionState.RECONNECTED, 10, after=mark)
    finally:
        stop.set()
        for thread in threads:
            thread.join(20)
    assert not errors, errors
    # A lease taken before a LOST and given back well after it (the listener has
    # run by then) must have been marked lost by the listener.
    held_across = [
        (lease, lost)
        for lease, taken, back, lost in done
        if any(taken < at < back - 0.2 for at in losses)
    ]
    assert len(held_across) >= 5, "the storm did not catch enough leases to prove anything"
    assert all(lost for _, lost in held_across), [lease for lease, lost in held_across if not lost]


def test_nothing_escapes_acquire_through_expiries(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()
    lock = Lock(client, "/through/lock")
    semaphore = Semaphore(client, "/through/sem", 2)
    recorder = StateRecorder()
    client.add_listener(recorder)
    stop = threading.Event()
    escaped: list[tuple[str, BaseException]] = []
    cycles = {"lock": 0, "sem": 0}

    def loop(name: str, acquire: Callable[[], bool], release: Callable[[], None]) -> None:
        while not stop.is_set():
            try:
                acquired = acquire()
            except Exception as exc:
                escaped.append((name, exc))
                continue
            if acquired:
                cycles[name] += 1
                with contextlib.suppress(Exception):
                    release()

    threads = [
        threading.Thread(target=loop, args=("lock", lambda: lock.acquire(timeout=5), lock.release)),
        threading.Thread(
            target=loop, args=("sem", lambda: semaphore.acquire(timeout=5), semaphore.release)
        ),
        threading.Thread(
            target=loop, args=("sem", lambda: semaphore.acquire(timeout=5), semaphore.release)
        ),
    ]
    for thread in threads:
        thread.start()
    try:
        for _ in range(8):
            time.sleep(0.4)
            mark = recorder.mark()
            expire_session(client)
            recorder.wait_for(ConnectionState.RECONNECTED, 10, after=mark)
    finally:
        stop.set()
        for thread in threads:
            thread.join(20)
    assert not escaped, escaped[:5]
    assert cycles["lock"] > 8
    assert cycles["sem"] > 8


# ---------------------------------------------------------------- stale state changes


def test_a_state_change_older_than_the_hold_is_ignored(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()
    lock = Lock(client, "/stale")
    assert lock.acquire(timeout=5)
    hold = lock._hold
    assert hold is not None
    old = StateChange(ConnectionState.LOST, client.session_id, time.monotonic(), seq=hold.seq)
    assert apply_change(client, hold, old) is False
    assert lock.is_held()
    suspended = StateChange(
        ConnectionState.SUSPENDED, client.session_id, time.monotonic(), seq=hold.seq + 1
    )
    assert apply_change(client, hold, suspended) is False
    assert hold.in_doubt
    lost = StateChange(ConnectionState.LOST, client.session_id, time.monotonic(), seq=hold.seq + 2)
    assert apply_change(client, hold, lost) is True
    lock.release()


def test_a_hold_taken_while_suspended_starts_in_doubt(
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory(hosts=zk_proxy.connect_string)
    created = client.create("/doubt/n", mode=CreateMode.EPHEMERAL, parents=True)
    recorder = StateRecorder()
    client.add_listener(recorder)
    zk_proxy.cut()
    recorder.wait_for(ConnectionState.SUSPENDED, 5)

    entry = Entry(
        created.path,
        "n",
        created.stat.czxid,
        created.stat.ephemeral_owner,
        client.session_epoch(created.stat.ephemeral_owner),
    )
    seq, in_doubt = taken_now(client)
    assert in_doubt
    hold = Hold(entry, seq, in_doubt)
    zk_proxy.heal()
    recorder.wait_for(ConnectionState.RECONNECTED, 10)
    reconnected = recorder.changes[-1]
    assert apply_change(client, hold, reconnected) is False
    assert not hold.in_doubt, "RECONNECTED on the same session with our node there clears it"
