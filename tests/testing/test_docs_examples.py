"""The pytest plugin's examples of docs/testing.md: the page includes them from this file."""

from __future__ import annotations

# --8<-- [start:tests]
from zk_recipes import ConnectionState, Lock
from zk_recipes.testing import StateRecorder, TcpProxy, expire_session
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_lock_is_lost_with_the_session(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()
    lock = Lock(client, "/jobs/report")
    assert lock.acquire(timeout=5)
    expire_session(client)  # on the server, for real
    assert lock.lost.wait(5)


def test_partition(zk_proxy: TcpProxy, zk_client_factory: ClientFactory) -> None:
    recorder = StateRecorder()
    client = zk_client_factory(hosts=zk_proxy.connect_string)
    client.add_listener(recorder)
    zk_proxy.blackhole()
    recorder.wait_for(ConnectionState.LOST, timeout=10)


# --8<-- [end:tests]
