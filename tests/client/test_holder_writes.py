"""Writes made as the holder of a node: sent only on the session that made it (kazoo/bound.py).

A fixed path and version 0 are not an identity: once the session that made a
node has ended, the next holder's node at the same path starts at version 0
too. So ``transaction(session=)``, ``set(session=)`` and ``delete(session=)``
check, at the moment the request is written, that the holder's session is
still the client's; otherwise nothing is written and ``HolderSessionLost``
says so. The guaranteed deleter deletes only the node it was asked about.
"""

from __future__ import annotations

import threading

import pytest

from zk_recipes import (
    ConfigurationError,
    CreateMode,
    HolderSessionLost,
    SessionLost,
    ZkClient,
)
from zk_recipes.testing import TcpProxy, ZooKeeperServer, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def _their_node_at(path: str, other: ZkClient) -> int:
    """Another session's node at ``path`` (as the next holder's would be); its czxid."""
    return other.create(path, b"theirs", mode=CreateMode.EPHEMERAL).stat.czxid


def test_after_the_session_ended_no_write_as_its_holder_reaches_the_next_holders_node(
    zk_client_factory: ClientFactory, zk_hosts: str
) -> None:
    holder, other = zk_client_factory(session_timeout=3.0), zk_client_factory()
    other.create("/hw", b"")
    mine = holder.create("/hw/claim", b"mine", mode=CreateMode.EPHEMERAL).stat
    assert mine.version == 0
    expire_session(holder, hosts=zk_hosts)
    wait_until(lambda: holder.wait_connected(0.1), "the holder on a new session")
    theirs = _their_node_at("/hw/claim", other)  # the same path, version 0 too

    with pytest.raises(HolderSessionLost):
        holder.transaction(session=mine.ephemeral_owner).check("/hw/claim", 0).set(
            "/hw/claim", b"stale"
        ).commit()
    with pytest.raises(HolderSessionLost):
        holder.set("/hw/claim", b"stale", 0, session=mine.ephemeral_owner)
    with pytest.raises(HolderSessionLost):
        holder.delete("/hw/claim", session=mine.ephemeral_owner)
    # A guaranteed delete's work is done: the holder's node went with its session.
    holder.delete("/hw/claim", guaranteed=True, session=mine.ephemeral_owner)
    assert holder.pending_deletes() == []

    data, stat = other.get("/hw/claim")
    assert (data, stat.czxid, stat.version) == (b"theirs", theirs, 0)
    # Unbound, the same transaction would have passed the check on their node.
    holder.transaction().check("/hw/claim", 0).commit()


def test_on_the_holders_session_writes_go_out_as_usual(zk_client: ZkClient) -> None:
    zk_client.create("/hw2", b"")
    made = zk_client.create("/hw2/claim", b"v0", mode=CreateMode.EPHEMERAL).stat
    owner = made.ephemeral_owner
    tx = zk_client.transaction(session=owner).check("/hw2/claim", 0).set("/hw2/claim", b"v1")
    tx.commit()
    assert zk_client.set("/hw2/claim", b"v2", 1, session=owner).version == 2
    assert zk_client.set_async("/hw2/claim", b"v3", session=owner).result(5).version == 3
    zk_client.delete("/hw2/claim", session=owner)
    assert zk_client.exists("/hw2/claim") is None


@pytest.mark.parametrize("path_taken", ["direct", "queued"])
def test_the_session_is_checked_where_the_request_is_written(
    zk_client_factory: ClientFactory, zk_proxy: TcpProxy, path_taken: str
) -> None:
    """A write whose holder's session ends between the call and the write is not written.

    ``still`` stands for "the holder's session is still the connection's" and
    turns False after the call has handed the request over: written directly
    by the caller (connected) or later by kazoo's connection thread (queued
    while disconnected), the request is refused where it is written.
    """
    client = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=10.0)
    checker = zk_client_factory(hosts=zk_proxy.connect_string)
    client.create("/hw3", b"before")
    conn = client._usable()  # the connection layer: where bound requests are written
    looks: list[bool] = []
    flip = threading.Event()

    def still() -> bool:
        looks.append(True)
        # direct: True at the call's own look, False at the write's (under the lock);
        # queued: True until the test says the session ended.
        return len(looks) < 2 if path_taken == "direct" else not flip.is_set()

    if path_taken == "queued":
        zk_proxy.cut()
        wait_until(lambda: not client.state or not client.state.is_connected, "disconnected")
    pending = conn.set_async(client._abs("/hw3"), b"stale", -1, still)
    if path_taken == "queued":
        flip.set()
        zk_proxy.heal()
    with pytest.raises(HolderSessionLost):
        pending.result(15)
    assert len(looks) >= 2  # looked at again where it was written
    wait_until(lambda: checker.wait_connected(0.1), "connected")
    assert checker.get("/hw3")[0] == b"before"
    # The connection is fine after a refused write: the next request goes through.
    assert client.set("/hw3", b"after").version == 1


def test_a_pending_delete_leaves_a_node_made_again_at_its_path_alone(
    zk_client_factory: ClientFactory, zk_proxy: TcpProxy, zk_private_server: ZooKeeperServer
) -> None:
    client = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=10.0)
    other = zk_client_factory(hosts=zk_private_server.connect_string)
    other.create("/hw4", b"")
    first = client.create("/hw4/node", b"first").stat  # persistent: no session to bind to
    zk_proxy.cut()
    wait_until(lambda: not client.state or not client.state.is_connected, "disconnected")
    client.delete("/hw4/node", guaranteed=True, czxid=first.czxid)  # queued
    assert client.pending_deletes() == ["/hw4/node"]
    other.delete("/hw4/node")
    again = other.create("/hw4/node", b"second").stat  # the same path, version 0 again
    zk_proxy.heal()
    assert client.wait_for_deletes(15)
    data, stat = other.get("/hw4/node")
    assert (data, stat.czxid) == (b"second", again.czxid)


def test_a_node_taken_back_cancels_its_pending_delete(
    zk_client_factory: ClientFactory, zk_proxy: TcpProxy, zk_private_server: ZooKeeperServer
) -> None:
    client = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=10.0)
    other = zk_client_factory(hosts=zk_private_server.connect_string)
    made = client.create("/hw5", b"", mode=CreateMode.EPHEMERAL).stat
    zk_proxy.cut()
    wait_until(lambda: not client.state or not client.state.is_connected, "disconnected")
    client.delete("/hw5", guaranteed=True, session=made.ephemeral_owner, czxid=made.czxid)
    assert client.cancel_pending_delete("/hw5") is True
    assert client.cancel_pending_delete("/hw5") is False
    zk_proxy.heal()
    wait_until(lambda: client.wait_connected(0.1), "reconnected on the same session")
    assert client.wait_for_deletes(5)
    stat = other.exists("/hw5")
    assert stat is not None
    assert stat.czxid == made.czxid


def test_a_holder_write_on_a_lost_session_is_a_session_lost(
    zk_client_factory: ClientFactory, zk_hosts: str
) -> None:
    """``HolderSessionLost`` is a ``SessionLost``: code that handles the loss handles it too."""
    holder = zk_client_factory(session_timeout=3.0)
    owner = holder.create("/hw6", b"", mode=CreateMode.EPHEMERAL).stat.ephemeral_owner
    expire_session(holder, hosts=zk_hosts)
    with pytest.raises(SessionLost):
        holder.set("/hw6", b"x", session=owner)


def test_a_recursive_delete_takes_no_holder(zk_client: ZkClient) -> None:
    with pytest.raises(ConfigurationError, match=r"recursive=True\) takes no session"):
        zk_client.delete("/x", recursive=True, session=zk_client.session_id)
