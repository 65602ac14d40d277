"""TcpProxy's drop_requests mode (client bytes dropped, server bytes delivered), with ZkClient.

The mode stands for the one-way partition that makes a client hear the server
while the server hears nothing from it. Each test checks one thing a real
partition like that does: notifications still arrive while requests get no
reply and the server expires the session; the server's close crosses over;
the client's close does not; a new connection never reaches the server; and
``heal()`` lets the client work again. Nothing here asserts when the client
declares LOST (the simulated expiry has tests of its own).
"""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest

from zk_recipes import (
    ConnectionLostError,
    ConnectionState,
    CreateMode,
    SessionLost,
    WatchEvent,
    WatchEventType,
)
from zk_recipes.testing import StateRecorder, ZooKeeperServer, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def _read_to_the_end(sock: socket.socket) -> bytes:
    """Everything the socket delivers until the peer closes or resets it."""
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(4096):
            received += chunk
    return received


class _Seen(threading.Event):
    """A watch callback that sets itself when an event of one type arrives."""

    def __init__(self, wanted: WatchEventType) -> None:
        super().__init__()
        self.wanted = wanted

    def __call__(self, event: WatchEvent) -> None:
        if event.type is self.wanted:
            self.set()


@pytest.mark.slow
def test_drop_requests_delivers_notifications_while_the_server_hears_nothing(
    zk_server: ZooKeeperServer, zk_client_factory: ClientFactory
) -> None:
    observer = zk_client_factory()
    observer.create("/watched", b"0")
    with zk_server.proxy() as proxy:
        client = zk_client_factory(hosts=proxy.connect_string, session_timeout=3.0)
        client.create("/mine", mode=CreateMode.EPHEMERAL)
        session_id = client.session_id
        # Only the real events count: a dropped connection fires NONE for every watch.
        notified = _Seen(WatchEventType.CHANGED)
        client.get("/watched", watch=notified)
        gone = _Seen(WatchEventType.DELETED)
        observer.exists("/mine", watch=gone)

        proxy.drop_requests()
        assert proxy.mode == "drop_requests"
        pending = client.set_async("/watched", b"from the partitioned client")
        observer.set("/watched", b"1")
        assert notified.wait(5.0), "the watch notification did not reach the client"

        # No request and no ping gets through, so the server expires the session
        # after its timeout (3 s) and deletes the client's ephemeral node.
        assert gone.wait(15.0), "the server did not expire the partitioned session"
        assert session_id not in zk_server.session_ids()
        # Two honest answers race here: the client's own missed ping (the
        # connection is lost, the set's fate unknown) and the server's close
        # once it expired the session (the session is gone). Either way the
        # set failed; which one wins is timing, not behaviour.
        with pytest.raises((ConnectionLostError, SessionLost)):
            pending.result(15.0)
        assert pending.done(), "the set was never answered nor failed"
        assert observer.get("/watched")[0] == b"1", "the client's set reached the server"

        proxy.heal()
        assert client.wait_connected(15.0)
        assert client.session_id != session_id
        assert client.get("/watched")[0] == b"1"
        client.set("/watched", b"2")
        assert observer.get("/watched")[0] == b"2"


def test_drop_requests_passes_the_servers_close_to_the_client(
    zk_server: ZooKeeperServer, zk_client_factory: ClientFactory
) -> None:
    with zk_server.proxy() as proxy:
        # A long session: by itself the client would notice the silence only after
        # two thirds of it (kazoo's missed ping) or 66% of it (simulated expiry).
        client = zk_client_factory(hosts=proxy.connect_string, session_timeout=20.0)
        recorder = StateRecorder()
        client.add_listener(recorder)
        session_id = client.session_id
        mark = recorder.mark()

        proxy.drop_requests()
        # The server ends the session and closes the client's connection; that close
        # travels server -> client, so it crosses the partition.
        expire_session(client, hosts=zk_server.connect_string)
        recorder.wait_for(ConnectionState.SUSPENDED, timeout=5.0, after=mark)

        proxy.heal()
        assert client.wait_connected(15.0)
        assert client.session_id != session_id


@pytest.mark.slow
def test_drop_requests_loses_the_clients_close(
    zk_server: ZooKeeperServer, zk_client_factory: ClientFactory
) -> None:
    observer = zk_client_factory()
    with zk_server.proxy() as proxy:
        client = zk_client_factory(hosts=proxy.connect_string, session_timeout=5.0)
        client.create("/mine", mode=CreateMode.EPHEMERAL)
        session_id = client.session_id

        proxy.drop_requests()
        client.close()  # its close-session request and its FIN are both lost
        # The server still holds the session and its node, until the session times out.
        assert session_id in zk_server.session_ids()
        assert observer.exists("/mine") is not None
        wait_until(lambda: observer.exists("/mine") is None, "the session expired", 15.0)


def test_drop_requests_never_connects_a_new_connection_onward(zk_server: ZooKeeperServer) -> None:
    with zk_server.proxy() as proxy:
        proxy.drop_requests()
        with socket.create_connection(proxy.address, timeout=10.0) as sock:
            sock.sendall(b"ruok")  # forwarded, the server would answer "imok" and close
            wait_until(lambda: proxy.accepted == 1, "the proxy accepted the connection")
            proxy.heal()  # a connection opened during a lossy mode is reset now
            received = _read_to_the_end(sock)
        assert b"imok" not in received
        assert proxy.connections == 0
