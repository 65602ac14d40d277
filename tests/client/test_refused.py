"""Every server refusing ends the waits that must answer at once; one refusal does not.

``ZkClient.start(refused_ends=True)`` (commands run with ``--no-wait``,
``status``, ``holders``) and ``ProcessClient.available()`` (locked views,
health) give up once a whole round of the servers refused: nothing listens,
so waiting for the connection timeout would only delay an honest answer. A
server among them that accepts must still be found, whichever order kazoo
tries them in. Connection timeouts here are 60 s; the bounds only prove that
it was not waited for.
"""

from __future__ import annotations

import time

import pytest

from zk_recipes import (
    ClientSettings,
    ConnectTimeoutError,
    ProcessClient,
    UnavailableError,
    ZkClient,
)
from zk_recipes.testing import free_ports

CONNECTION_TIMEOUT = 60.0
NOT_WAITED = 20.0


def _closed(count: int) -> list[str]:
    return [f"127.0.0.1:{port}" for port in free_ports(count)]


def test_start_gives_up_once_every_server_refused() -> None:
    client = ZkClient(settings=ClientSettings(hosts=",".join(_closed(3))))
    began = time.monotonic()
    with pytest.raises(ConnectTimeoutError, match=r"every server of .* refused the connection"):
        client.start(CONNECTION_TIMEOUT, refused_ends=True)
    assert time.monotonic() - began < NOT_WAITED
    assert not client.is_started
    client.close()


@pytest.mark.parametrize("attempt", range(4))  # kazoo shuffles the hosts: both orders come up
def test_a_refusing_server_beside_a_live_one_is_not_an_outage(
    attempt: int, zk_hosts: str, zk_namespace: str
) -> None:
    hosts = ",".join([*_closed(1), zk_hosts])
    settings = ClientSettings(
        hosts=hosts, namespace=zk_namespace, connection_timeout=CONNECTION_TIMEOUT
    )
    client = ZkClient(settings=settings)
    try:
        client.start(refused_ends=True)
        assert client.exists("/") is not None
    finally:
        client.close()
    clients = ProcessClient(lambda: settings)
    try:
        assert clients.available(wait=CONNECTION_TIMEOUT).exists("/") is not None
    finally:
        clients.close()


def test_available_answers_once_every_server_refused() -> None:
    settings = ClientSettings(hosts=",".join(_closed(2)), connection_timeout=CONNECTION_TIMEOUT)
    clients = ProcessClient(lambda: settings)
    try:
        began = time.monotonic()
        with pytest.raises(UnavailableError, match="Connection refused"):
            clients.available(wait=CONNECTION_TIMEOUT)
        assert time.monotonic() - began < NOT_WAITED
    finally:
        clients.close()


def test_available_answers_once_no_host_name_resolves() -> None:
    settings = ClientSettings(
        hosts="zk-recipes-no-such-host.invalid:2181", connection_timeout=CONNECTION_TIMEOUT
    )
    clients = ProcessClient(lambda: settings)
    try:
        began = time.monotonic()
        with pytest.raises(UnavailableError):
            clients.available(wait=CONNECTION_TIMEOUT)
        assert time.monotonic() - began < NOT_WAITED
    finally:
        clients.close()
