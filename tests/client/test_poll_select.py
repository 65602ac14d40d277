"""poll_select keeps the contract of kazoo's selector_select, which it replaces on our client."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from kazoo.handlers.utils import selector_select

from zk_recipes._client.poll_select import poll_select


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


@pytest.mark.parametrize("select", [poll_select, selector_select])
def test_readable_writable_and_read_first(
    select: object, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    call = select  # both implementations must answer alike
    assert call([a], [], [], 0) == ([], [], [])  # type: ignore[operator]
    # An object in both lists is listed once per list it came from (kazoo's way).
    assert call([a], [a], [], 0) == ([], [a, a], [])  # type: ignore[operator]
    b.send(b"x")
    # Readable and writable: reported readable only (kazoo's elif).
    assert call([a], [a], [], 0) == ([a, a], [], [])  # type: ignore[operator]
    assert call([a.fileno()], [], [], None) == ([a.fileno()], [], [])  # type: ignore[operator]
    b.close()
    a.recv(1)
    # The peer closed: ready, so the recv that follows sees it.
    assert call([a], [], [], 0) == ([a], [], [])  # type: ignore[operator]


def test_the_timeout_and_bad_arguments_are_kazoos(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, _ = pair
    assert poll_select([a], [], [], 0.01) == ([], [], [])
    with pytest.raises(ValueError, match="non-negative"):
        poll_select([a], [], [], -1)
    with pytest.raises(TypeError, match="number"):
        poll_select([a], [], [], "1")  # type: ignore[arg-type]
    closed = socket.socket()
    closed.close()
    with pytest.raises(ValueError, match="Invalid file descriptor"):
        poll_select([closed], [], [], 0)


def test_a_client_uses_it_and_works(zk_client: object) -> None:
    from zk_recipes import ZkClient

    assert isinstance(zk_client, ZkClient)
    kz = zk_client._conn._kz  # type: ignore[union-attr]
    assert kz.handler.select is poll_select
    zk_client.create("/polled", b"yes", parents=True)
    assert zk_client.get("/polled")[0] == b"yes"
