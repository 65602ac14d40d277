"""An outage is not "busy": the kit's LockTarget and ProcessClient.available(), real servers.

A paused or partitioned server is a black-holed proxy (TCP accepted, nothing
answered); an ensemble that is not there is a closed port. The bounds below
are far under the connection timeout (30 s here), which is what a face used
to wait: they prove "no waiting for a connection", not a speed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from zk_recipes import (
    ClientSettings,
    ConnectionState,
    Lock,
    ProcessClient,
    UnavailableError,
    ZkClient,
)
from zk_recipes.frameworks import LockTarget, lock_path
from zk_recipes.testing import (
    Recorder,
    TcpProxy,
    ZooKeeperServer,
    free_ports,
    wait_for_children,
    wait_until,
)
from zk_recipes.testing.pytest_plugin import ClientFactory

#: Far longer than any answer here may take: the old behaviour waited this long.
CONNECTION_TIMEOUT = 30.0
#: "At once": well under the connection timeout, generous for a busy machine.
AT_ONCE = 5.0
SESSION_TIMEOUT = 3.0


@pytest.fixture
def proxy(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def _settings(
    hosts: str, namespace: str, session_timeout: float = SESSION_TIMEOUT
) -> ClientSettings:
    return ClientSettings(
        hosts=hosts,
        namespace=namespace,
        session_timeout=session_timeout,
        connection_timeout=CONNECTION_TIMEOUT,
    )


@pytest.fixture
def process_clients() -> Iterator[list[ProcessClient]]:
    made: list[ProcessClient] = []
    yield made
    for process_client in made:
        process_client.close()


def _process_client(
    made: list[ProcessClient], hosts: str, namespace: str, session_timeout: float = SESSION_TIMEOUT
) -> ProcessClient:
    process_client = ProcessClient(_settings(hosts, namespace, session_timeout))
    made.append(process_client)
    return process_client


def test_the_first_call_waits_for_the_first_connection(
    zk_hosts: str, zk_namespace: str, process_clients: list[ProcessClient]
) -> None:
    process_client = _process_client(process_clients, zk_hosts, zk_namespace)
    client = process_client.available()
    assert client.state is ConnectionState.CONNECTED
    assert process_client.available() is client


def test_a_closed_port_is_unavailable_at_once_with_the_reason(
    zk_namespace: str, process_clients: list[ProcessClient]
) -> None:
    (port,) = free_ports(1)
    process_client = _process_client(process_clients, f"127.0.0.1:{port}", zk_namespace)
    for _ in range(3):
        began = time.monotonic()
        with pytest.raises(UnavailableError, match="no connection to ZooKeeper") as caught:
            process_client.available()
        assert time.monotonic() - began < AT_ONCE
    assert caught.value.problem is not None
    assert "refused" in caught.value.problem
    assert "refused" in str(caught.value)


def test_a_silent_server_is_waited_for_once_then_answered_at_once(
    proxy: TcpProxy, zk_namespace: str, process_clients: list[ProcessClient]
) -> None:
    proxy.blackhole()  # TCP is accepted, the handshake never answered: a paused server
    process_client = _process_client(process_clients, proxy.connect_string, zk_namespace)
    began = time.monotonic()
    with pytest.raises(UnavailableError, match="no connection to ZooKeeper"):
        process_client.available(wait=1.0)
    first = time.monotonic() - began
    assert 1.0 <= first < AT_ONCE, "the first call waits for the first connection, once"
    began = time.monotonic()
    with pytest.raises(UnavailableError):
        process_client.available(wait=1.0)
    assert time.monotonic() - began < 1.0, "the first second is over: no second wait"
    proxy.heal()
    current = process_client.current()
    assert current is not None
    assert current.wait_connected(CONNECTION_TIMEOUT)
    assert process_client.available().state is ConnectionState.CONNECTED


def test_a_lock_held_elsewhere_is_busy_and_an_outage_is_not(
    proxy: TcpProxy,
    zk_namespace: str,
    zk_client: ZkClient,
    process_clients: list[ProcessClient],
) -> None:
    process_client = _process_client(process_clients, proxy.connect_string, zk_namespace)
    target = LockTarget("report", process_client, timeout=0)
    holder = Lock(zk_client, target.path)
    assert holder.acquire()
    try:
        assert target.acquire() is None, "held elsewhere: busy"
    finally:
        holder.release()

    client = process_client.available()
    states = Recorder[ConnectionState]()
    client.add_listener(lambda change: states(change.state))
    proxy.blackhole()
    # Still CONNECTED as far as the client knows: the attempt goes unanswered.
    began = time.monotonic()
    with pytest.raises(UnavailableError, match="did not answer while taking the lock"):
        target.acquire()
    assert time.monotonic() - began < AT_ONCE
    # Once the client knows (SUSPENDED), no request is even sent.
    states.wait_for(lambda state: state is ConnectionState.SUSPENDED)
    began = time.monotonic()
    with pytest.raises(UnavailableError, match=r"is (SUSPENDED|LOST)"):
        target.acquire()
    assert time.monotonic() - began < 1.0

    proxy.heal()
    assert client.wait_connected(CONNECTION_TIMEOUT)
    lock = target.acquire()
    assert lock is not None
    assert lock.is_held()
    lock.release()
    # The unanswered attempts left no node behind once the client could clean up.
    wait_for_children(zk_client, lock_path("report"), 0)


def test_after_one_unanswered_attempt_the_next_answers_at_once_while_still_connected(
    proxy: TcpProxy,
    zk_namespace: str,
    process_clients: list[ProcessClient],
) -> None:
    """A paused server: the client says SUSPENDED only at its next missed ping (~6.7 s here).

    Until then each request would wait for a reply that is not coming; the
    first attempt's unanswered create shows the silence to the next one.
    """
    process_client = _process_client(
        process_clients, proxy.connect_string, zk_namespace, session_timeout=10.0
    )
    target = LockTarget("report", process_client, timeout=0)
    client = process_client.available()
    proxy.blackhole()
    with pytest.raises(UnavailableError, match="did not answer while taking the lock"):
        target.acquire()
    assert client.state is ConnectionState.CONNECTED, "still believed connected"
    # The attempt's create waits unanswered (under load it may go out late: wait for it).
    wait_until(lambda: client.unanswered_for > 1.0, "a write unanswered for a second", timeout=5)
    assert client.state is ConnectionState.CONNECTED
    began = time.monotonic()
    with pytest.raises(UnavailableError, match="is not answering") as refused:
        target.acquire()
    assert time.monotonic() - began < 0.5, "it sent a request and waited for its reply"
    assert refused.value.problem is not None
    assert "no reply to a request sent" in refused.value.problem
    proxy.heal()  # resets the connection: the client reconnects, the session resumes
    wait_until(
        lambda: (
            client.state in (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)
            and client.unanswered_for == 0.0
        ),
        "connected again, nothing unanswered",
        timeout=CONNECTION_TIMEOUT,
    )
    lock = target.acquire()
    assert lock is not None
    lock.release()


def test_a_waiter_cut_off_while_queued_is_told_unavailable_not_timed_out(
    proxy: TcpProxy,
    zk_namespace: str,
    zk_client: ZkClient,
    process_clients: list[ProcessClient],
) -> None:
    process_client = _process_client(process_clients, proxy.connect_string, zk_namespace)
    target = LockTarget("report", process_client, timeout=SESSION_TIMEOUT * 3)
    holder = Lock(zk_client, target.path)
    assert holder.acquire()
    try:
        process_client.available()
        outcomes = Recorder[object]()

        def wait() -> None:
            try:
                outcomes(target.acquire())
            except BaseException as exc:
                outcomes(exc)

        threading.Thread(target=wait, daemon=True).start()
        wait_for_children(zk_client, target.path, 2)  # queued behind the holder
        proxy.blackhole()
        outcome = outcomes.wait_for(lambda _: True, timeout=SESSION_TIMEOUT * 6)
        assert isinstance(outcome, UnavailableError), outcome
    finally:
        holder.release()
        proxy.heal()


def test_a_silent_server_under_a_connected_client_is_told_in_about_a_second(
    proxy: TcpProxy, zk_namespace: str, process_clients: list[ProcessClient]
) -> None:
    """Not when the session is declared LOST (2/3 of a 10 s session): the attempt's own bound."""
    process_client = _process_client(
        process_clients, proxy.connect_string, zk_namespace, session_timeout=10.0
    )
    target = LockTarget("report", process_client, timeout=0)
    client = process_client.available()
    proxy.blackhole()
    began = time.monotonic()
    with pytest.raises(UnavailableError, match="did not answer"):
        target.acquire()
    assert time.monotonic() - began < 10.0 * 2 / 3 - 2.0, "bounded by the attempt, not the LOST"
    assert client.state is ConnectionState.CONNECTED, "the client had not noticed yet"
    proxy.heal()


def test_a_client_factory_that_is_not_connected_is_unavailable(
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory(start=False)
    target = LockTarget("x", lambda: client, timeout=0)
    with pytest.raises(UnavailableError, match="not made yet"):
        target.acquire()
