"""kazoo's connection thread reads and writes: the socket first, a wait only when it would block.

Why: kazoo's ``_read`` and ``_write`` wait for the socket before every
``recv`` and ``send``, even when the bytes are already there, which they
nearly always are: the connection loop has just seen the socket readable,
and a request of a few hundred bytes fits the send buffer. That was two or
three waits per request (../shared/notes/perf-profile.md, cut 2). Here the
``recv`` or ``send`` comes first, on kazoo's non-blocking socket, and the
wait happens only on EAGAIN.

What stays kazoo's:

- the timeouts: each wait lasts at most ``timeout``, as kazoo's does, so a
  server that falls silent in the middle of a packet still ends in kazoo's
  timeout error, then SUSPENDED, then (our watchdog) a simulated LOST in time;
- the errors: an orderly close by the peer raises ``broken()``, any other
  socket error propagates as ``OSError`` for the caller to translate (kazoo's
  ``_socket_error_handling`` does the same);
- TLS: an ``SSLSocket`` never comes here. KazooConnection sends it down
  kazoo's own path, which knows about ``pending()`` and renegotiation.

A candidate for kazoo upstream, with poll_select: both help every kazoo user.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable

from zk_recipes._client.poll_select import wait_ready


def read_exactly(
    sock: socket.socket,
    length: int,
    timeout: float | None,
    timed_out: Callable[[], BaseException],
    broken: Callable[[], BaseException],
) -> bytes:
    """``length`` bytes from the non-blocking ``sock``.

    Raises ``timed_out()`` when a wait of ``timeout`` seconds ends with
    nothing to read, ``broken()`` when the peer closed the connection.
    """
    parts: list[bytes] = []
    remaining = length
    while remaining > 0:
        try:
            chunk = sock.recv(remaining)
        except BlockingIOError:
            if not wait_ready(sock, select.POLLIN, timeout):
                raise timed_out() from None
            continue
        if not chunk:
            raise broken()
        if len(chunk) == length:
            return chunk  # the usual case: one recv, nothing to join
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


def send_all(
    sock: socket.socket,
    data: bytes,
    timeout: float | None,
    timed_out: Callable[[], BaseException],
    broken: Callable[[], BaseException],
) -> None:
    """All of ``data`` to the non-blocking ``sock``; errors as in ``read_exactly``."""
    view = memoryview(data)
    sent = 0
    while sent < len(view):
        try:
            count = sock.send(view[sent:])
        except BlockingIOError:
            if not wait_ready(sock, select.POLLOUT, timeout):
                raise timed_out() from None
            continue
        if not count:
            raise broken()
        sent += count
