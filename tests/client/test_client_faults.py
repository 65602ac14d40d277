"""ZkClient under faults: server stop/restart, expiry, partitions, lost replies, cluster failover.

These tests break servers, so they use ``zk_private_server`` (one per module)
and ``zk_proxy`` rather than the session-wide ``zk_server``.
"""

from __future__ import annotations

import threading
import time

import pytest

from zk_recipes import (
    ConnectionLostError,
    ConnectionState,
    CreateMode,
    OperationTimeoutError,
    WatchEvent,
    WatchEventType,
    ZkClient,
    ZkRecipesError,
)
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


def _deleted_event(observer: ZkClient, path: str) -> threading.Event:
    """An event set (by a client that is not under test) when ``path`` is deleted."""
    gone = threading.Event()

    def watch(event: WatchEvent) -> None:
        if event.type is WatchEventType.DELETED:
            gone.set()

    assert observer.exists(path, watch=watch) is not None
    return gone


def test_server_stop_and_start_suspends_then_reconnects_same_session(
    zk_private_server: ZooKeeperServer, zk_client_factory: ClientFactory
) -> None:
    recorder = StateRecorder()
    client = zk_client_factory(
        # 8 s: a JVM's stop and start took over 3.6 s (90% of 4 s) on a loaded 2-core box
        hosts=zk_private_server.connect_string,
        session_timeout=8.0,
        simulated_expiry_fraction=0.9,
    )
    client.add_listener(recorder)
    client.create("/eph", mode=CreateMode.EPHEMERAL, parents=True)
    session = client.session_id
    zk_private_server.restart()  # graceful stop + start on the same port and data
    recorder.wait_for(ConnectionState.SUSPENDED, timeout=5)
    change = recorder.wait_for(ConnectionState.RECONNECTED, timeout=15)
    assert change.session_id == session
    assert ConnectionState.LOST not in recorder.states
    assert client.exists("/eph") is not None


def test_server_side_expiry_is_lost_then_reconnected_with_a_new_session(
    zk_private_server: ZooKeeperServer, zk_client_factory: ClientFactory
) -> None:
    recorder = StateRecorder()
    client = zk_client_factory(hosts=zk_private_server.connect_string)
    client.add_listener(recorder)
    client.create("/eph", mode=CreateMode.EPHEMERAL, parents=True)
    old = client.session_id
    expire_session(client)
    lost = recorder.wait_for(ConnectionState.LOST, timeout=5)
    reconnected = recorder.wait_for(ConnectionState.RECONNECTED, timeout=10)
    assert lost.session_id == old
    assert not lost.simulated
    assert reconnected.session_id == client.session_id != old
    assert recorder.states.index(ConnectionState.LOST) < recorder.states.index(
        ConnectionState.RECONNECTED
    )
    assert client.exists("/eph") is None


def test_partition_is_declared_lost_locally_before_the_server_expires_the_session(
    zk_private_server: ZooKeeperServer, zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    session_timeout = 3.0
    recorder = StateRecorder()
    client = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=session_timeout)
    observer = zk_client_factory(hosts=zk_private_server.connect_string)
    client.add_listener(recorder)
    client.create("/held", mode=CreateMode.EPHEMERAL, parents=True)
    old = client.session_id
    server_expired = _deleted_event(observer, "/held")
    cut_at = time.monotonic()
    zk_proxy.blackhole()  # a partition: no RST, no bytes
    lost = recorder.wait_for(ConnectionState.LOST, timeout=2 * session_timeout)
    assert lost.simulated
    assert lost.session_id == old
    assert server_expired.wait(3 * session_timeout), "server never expired the session"
    expired_at = time.monotonic()
    lost_after = lost.at - cut_at
    expired_after = expired_at - cut_at
    # LOST comes first, with a margin, and well inside the session timeout.
    assert lost_after < expired_after
    assert lost_after < session_timeout
    print(f"LOST raised {lost_after:.2f} s after the cut; server expired {expired_after:.2f} s")
    zk_proxy.heal()
    reconnected = recorder.wait_for(ConnectionState.RECONNECTED, timeout=10)
    assert reconnected.session_id not in (0, old)
    assert recorder.states == [
        ConnectionState.SUSPENDED,
        ConnectionState.LOST,
        ConnectionState.RECONNECTED,
    ]


def test_short_blip_keeps_the_session(zk_proxy: TcpProxy, zk_client_factory: ClientFactory) -> None:
    recorder = StateRecorder()
    client = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=4.0)
    client.add_listener(recorder)
    session = client.session_id
    zk_proxy.cut()
    recorder.wait_for(ConnectionState.SUSPENDED, timeout=5)
    zk_proxy.heal()
    assert recorder.wait_for(ConnectionState.RECONNECTED, timeout=5).session_id == session
    assert ConnectionState.LOST not in recorder.states


def test_abandoned_session_is_closed_on_the_server_after_reconnect(
    zk_private_server: ZooKeeperServer, zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    # Simulated expiry with a long server-side timeout: when the client gets
    # through again, it closes the session it gave up on, so its ephemeral
    # nodes go now instead of after the (long) session timeout.
    recorder = StateRecorder()
    client = zk_client_factory(
        hosts=zk_proxy.connect_string, session_timeout=8.0, simulated_expiry_fraction=0.2
    )
    observer = zk_client_factory(hosts=zk_private_server.connect_string)
    client.add_listener(recorder)
    client.create("/held", mode=CreateMode.EPHEMERAL, parents=True)
    old = client.session_id
    gone = _deleted_event(observer, "/held")
    zk_proxy.blackhole()
    recorder.wait_for(ConnectionState.LOST, timeout=8)
    zk_proxy.heal()
    recorder.wait_for(ConnectionState.RECONNECTED, timeout=10)
    assert client.session_id != old
    assert gone.wait(4.0), "the abandoned session's node outlived the reconnect"


def test_protected_create_recovers_its_node_when_the_reply_is_lost(
    zk_private_server: ZooKeeperServer, zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    recorder = StateRecorder()
    client = zk_client_factory(
        hosts=zk_proxy.connect_string, session_timeout=4.0, simulated_expiry_fraction=0.95
    )
    observer = zk_client_factory(hosts=zk_private_server.connect_string)
    client.add_listener(recorder)
    client.ensure_path("/locks/p")
    session = client.session_id
    zk_proxy.drop_replies()  # the server gets the create; the client never hears back
    mark = recorder.mark()

    def heal_once_suspended() -> None:
        recorder.wait_for(ConnectionState.SUSPENDED, 10, after=mark)
        zk_proxy.heal()

    healer = threading.Thread(target=heal_once_suspended)
    healer.start()
    created = client.create("/locks/p/lock-", mode=CreateMode.EPHEMERAL_SEQUENTIAL, protected=True)
    healer.join(10)
    assert client.session_id == session
    children = observer.get_children("/locks/p")
    assert len(children) == 1, f"orphan left behind: {children}"
    assert created.path == f"/locks/p/{children[0]}"
    assert created.stat.ephemeral_owner == session


def test_guaranteed_delete_completes_after_the_connection_comes_back(
    zk_private_server: ZooKeeperServer, zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    recorder = StateRecorder()
    client = zk_client_factory(
        hosts=zk_proxy.connect_string,
        session_timeout=6.0,
        connection_timeout=1.0,
        simulated_expiry_fraction=0.9,
    )
    observer = zk_client_factory(hosts=zk_private_server.connect_string)
    client.add_listener(recorder)
    client.create("/gd/node", parents=True)  # persistent: only a delete removes it
    zk_proxy.cut()
    recorder.wait_for(ConnectionState.SUSPENDED, timeout=5)
    with pytest.raises((ConnectionLostError, OperationTimeoutError)):
        client.delete("/gd/node")  # without guaranteed=, the failure is the caller's
    client.delete("/gd/node", guaranteed=True)  # returns at once; retried in the background
    assert client.pending_deletes() == ["/gd/node"]
    assert observer.exists("/gd/node") is not None
    zk_proxy.heal()
    assert client.wait_for_deletes(10)
    assert observer.exists("/gd/node") is None


@pytest.mark.cluster
def test_killing_the_clients_server_keeps_the_session_and_its_ephemerals(
    zk_cluster: ZooKeeperCluster, zk_client_factory: ClientFactory
) -> None:
    recorder = StateRecorder()
    client = zk_client_factory(
        hosts=zk_cluster.connect_string, session_timeout=4.0, simulated_expiry_fraction=0.9
    )
    observer = zk_client_factory(hosts=zk_cluster.connect_string)
    client.add_listener(recorder)
    client.create("/eph", mode=CreateMode.EPHEMERAL, parents=True)
    session = client.session_id
    member = zk_cluster.server_for_session(session)
    assert member is not None
    member.kill()
    try:
        recorder.wait_for(ConnectionState.SUSPENDED, timeout=5)
        change = recorder.wait_for(ConnectionState.RECONNECTED, timeout=10)
        assert change.session_id == session
        assert ConnectionState.LOST not in recorder.states
        assert zk_cluster.server_for_session(session) not in (None, member)
        stat = observer.exists("/eph")
        assert stat is not None
        assert stat.ephemeral_owner == session
    finally:
        member.restart()
        zk_cluster.wait_for_quorum(30)


def test_close_returns_after_a_long_outage_with_requests_made_meanwhile(
    zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    """kazoo queues one wake-up byte per request made while disconnected; close() must not
    block on a full wake socket (found with `zk-recipes leader` polling its queue for minutes)."""
    client = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=2.0)
    zk_proxy.cut()
    wait_until(lambda: client.state is not ConnectionState.CONNECTED, "the cut was noticed")
    made = refused = 0
    for _ in range(3000):  # far more than a socket pair holds as 1-byte messages
        made += 1
        try:
            client.get_children_async("/")
        except ZkRecipesError:
            refused += 1  # refused at once (ConnectionLostError), never queued
    assert refused > 0
    closer = threading.Thread(target=client.close, daemon=True)
    closer.start()
    closer.join(15.0)
    assert not closer.is_alive(), f"close() blocked after {made} requests made during an outage"
