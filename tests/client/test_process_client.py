"""ProcessClient: one client per process, made lazily, never shared across fork()."""

from __future__ import annotations

import logging
import os
import warnings

import pytest

from zk_recipes import ClientSettings, CreateMode, ProcessClient
from zk_recipes.testing import ZooKeeperServer, wait_until


@pytest.fixture
def settings(zk_hosts: str, zk_namespace: str) -> ClientSettings:
    return ClientSettings(hosts=zk_hosts, namespace=zk_namespace, session_timeout=3.0)


def test_get_makes_one_connected_client_and_close_ends_its_session(
    settings: ClientSettings, zk_server: ZooKeeperServer
) -> None:
    reads: list[int] = []

    def read_settings() -> ClientSettings:
        reads.append(1)
        return settings

    clients = ProcessClient(read_settings)
    assert reads == [], "settings are read on first use, not before"
    assert clients.current() is None
    client = clients.get()
    assert client.is_started
    assert clients.get() is client
    assert clients.current() is client
    session = client.session_id
    client.create("/mine", mode=CreateMode.EPHEMERAL)

    clients.close()
    assert client.is_closed
    assert session not in zk_server.tracked_session_ids()
    again = clients.get()  # a closed client is replaced on the next use
    assert again is not client
    assert again.exists("/mine") is None
    clients.close()


def test_a_forked_child_makes_its_own_client_and_spares_the_parents_session(
    settings: ClientSettings,
) -> None:
    clients = ProcessClient(settings)
    parent = clients.get()
    parent.create("/parent", mode=CreateMode.EPHEMERAL)
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12: fork with threads
        pid = os.fork()
    if pid == 0:  # child: report by exit byte, never return into pytest
        code = 1
        try:
            if clients.current() is None:
                child = clients.get(timeout=10)
                code = 0 if child is not parent and child.session_id != parent.session_id else 2
                clients.close()  # closes the child's session only
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"\x00"
    os.close(read)
    assert clients.get() is parent
    assert parent.exists("/parent") is not None, "the parent's session and nodes survive"
    clients.close()


def test_close_during_a_background_start_is_quiet_and_leaves_no_session(
    settings: ClientSettings, zk_server: ZooKeeperServer, caplog: pytest.LogCaptureFixture
) -> None:
    baseline = zk_server.connected_session_ids()
    with caplog.at_level(logging.DEBUG, logger="zk_recipes.process"):
        for _ in range(5):
            clients = ProcessClient(settings)
            clients.start_in_background()
            clients.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    wait_until(
        lambda: not zk_server.connected_session_ids() - baseline,
        "no session outlives close()",
        timeout=5,
    )


def test_get_waits_for_the_background_start(settings: ClientSettings) -> None:
    clients = ProcessClient(settings)
    clients.start_in_background()
    client = clients.get(timeout=10)
    assert client.is_started
    assert client.exists("/") is not None
    clients.close()
