"""The connection thread's read-first / write-first I/O (zk_recipes/_client/socket_io.py).

On a real non-blocking socket pair, as kazoo's connection has one: the bytes
come whole however they are split, a wait happens only when nothing is there
and ends in the timeout error, and a peer that closes gives the broken error.
The end-to-end behaviour (a server silent mid-packet -> SUSPENDED -> LOST on
time) is in tests/client/test_request_path_faults.py.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from zk_recipes._client.socket_io import read_exactly, send_all


class TimedOut(Exception):
    pass


class Broken(Exception):
    pass


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    try:
        yield ours, peer
    finally:
        ours.close()
        peer.close()


def test_reads_what_is_there_without_waiting(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, peer = pair
    peer.sendall(b"abcdefgh")
    assert read_exactly(ours, 3, 0.0, TimedOut, Broken) == b"abc"
    assert read_exactly(ours, 5, 0.0, TimedOut, Broken) == b"defgh"


def test_a_message_in_pieces_comes_whole(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, peer = pair
    message = bytes(range(256)) * 64

    def dribble() -> None:
        for start in range(0, len(message), 1000):
            peer.sendall(message[start : start + 1000])
            time.sleep(0.001)

    sender = threading.Thread(target=dribble)
    sender.start()
    try:
        assert read_exactly(ours, len(message), 5.0, TimedOut, Broken) == message
    finally:
        sender.join(10)


def test_silence_mid_message_is_a_timeout(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, peer = pair
    peer.sendall(b"half")
    with pytest.raises(TimedOut):
        read_exactly(ours, 8, 0.05, TimedOut, Broken)


def test_a_closed_peer_is_broken(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, peer = pair
    peer.sendall(b"ab")
    peer.close()
    with pytest.raises(Broken):
        read_exactly(ours, 4, 1.0, TimedOut, Broken)


def test_a_reset_socket_raises_oserror_for_the_caller(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, _peer = pair
    ours.shutdown(socket.SHUT_WR)
    with pytest.raises(BrokenPipeError):
        send_all(ours, b"x", 1.0, TimedOut, Broken)


def test_send_all_waits_while_the_buffer_is_full(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, peer = pair
    message = b"z" * (8 << 20)  # far beyond a socket buffer: send hits EAGAIN and waits
    received = bytearray()

    def drain() -> None:
        while len(received) < len(message):
            chunk = peer.recv(1 << 16)
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        send_all(ours, message, 5.0, TimedOut, Broken)
    finally:
        reader.join(10)
    assert bytes(received) == message


def test_a_full_buffer_nobody_reads_is_a_timeout(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, _peer = pair
    with pytest.raises(TimedOut):
        send_all(ours, b"z" * (8 << 20), 0.05, TimedOut, Broken)
