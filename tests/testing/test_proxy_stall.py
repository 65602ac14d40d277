"""TcpProxy's stall_replies mode, byte for byte, against a plain TCP peer.

A ZooKeeper reply is a 4-byte big-endian length and a body. While stalled,
the client must get the length prefix and half of the next frame, then
nothing, while its own bytes still reach the server; ``heal()`` resets the
broken connection.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest

from zk_recipes.testing import TcpProxy


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _receive(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            break
        data += chunk
    return data


@pytest.fixture
def wired() -> Iterator[tuple[TcpProxy, socket.socket, socket.socket]]:
    listener = socket.create_server(("127.0.0.1", 0))
    proxy = TcpProxy(*listener.getsockname()[:2])
    client = socket.create_connection(proxy.address, timeout=5)
    server, _ = listener.accept()
    server.settimeout(5)
    listener.close()
    yield proxy, client, server
    for sock in (client, server):
        sock.close()
    proxy.close()


def test_stall_passes_the_prefix_and_half_a_frame_then_nothing(
    wired: tuple[TcpProxy, socket.socket, socket.socket],
) -> None:
    proxy, client, server = wired
    first = _frame(b"12345678")
    server.sendall(first)
    assert _receive(client, len(first)) == first  # forwarding, frames followed
    proxy.stall_replies()
    stalled = _frame(b"abcdefghij")
    server.sendall(stalled + _frame(b"more"))
    assert _receive(client, 9) == stalled[:9]  # the prefix and 5 of 10 body bytes
    client.settimeout(0.5)
    with pytest.raises(TimeoutError):
        client.recv(1)  # then silence, mid-packet
    client.sendall(b"ping")
    assert _receive(server, 4) == b"ping"  # the server still hears the client
    assert proxy.mode == "stall_replies"
    proxy.heal()
    client.settimeout(5)
    # The broken stream is reset, so the client reconnects cleanly.
    with pytest.raises(ConnectionResetError):
        _receive(client, 1)


def test_stall_with_a_frame_under_way_passes_nothing_more_of_it(
    wired: tuple[TcpProxy, socket.socket, socket.socket],
) -> None:
    proxy, client, server = wired
    frame = _frame(b"0123456789")
    server.sendall(frame[:7])
    assert _receive(client, 7) == frame[:7]
    proxy.stall_replies()
    server.sendall(frame[7:] + _frame(b"next"))
    client.settimeout(0.5)
    with pytest.raises(TimeoutError):
        client.recv(1)
