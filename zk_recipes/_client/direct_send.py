"""Requests written by the calling thread, while nothing is queued ahead of them.

Why: kazoo sends every request from its connection thread. The caller puts
the request on a queue and writes one byte on a socket pair to wake that
thread, which reads the byte back and writes the request: two system calls
and a thread switch per request, and two of them sit on every lock
hand-off (the re-list and the delete). Writing from the caller saves them
(../shared/notes/perf-profile.md, cut 5).

How it stays correct, the rules that KazooConnection wires in:

- **One writer at a time, in wire order.** ``lock`` is held by a direct
  send from the xid it takes to its last byte, and by kazoo's own senders
  (``_send_request``, ``_send_ping``) around theirs. The reply reader
  matches replies to ``_pending`` in order, so a request is appended there
  before its first byte leaves, in the same step as its xid.
- **Never ahead of the queue.** While kazoo's queue holds anything (requests
  made while disconnected, an auth packet, the close request, the
  expire-now marker), ``send`` says no and the caller queues behind it: the
  queue only empties under ``lock``, after its last request was written, so
  requests from one thread keep their order.
- **Only on a connection that is up.** The socket is given at the end of a
  successful handshake and taken away, under ``lock``, before kazoo fails the
  pending requests of a dropped connection and when the connection attempt
  ends. A send that meets no socket falls back to kazoo's queue, which
  knows how to wait for the next connection. A write that waits on a full
  socket does so no longer than kazoo waits between pings (kazoo's thread
  needs ``lock`` to ping), and a connection that ends shuts the socket down
  first (``abort``, without the lock), so such a write fails at once and
  kazoo's SUSPENDED is not held up behind it.
- **A failed write breaks the connection.** A frame may be half written, so
  nothing more can follow it: the socket is shut down, kazoo's thread sees
  the drop at once and fails every pending request, this one included, with
  ConnectionLoss (which the caller reads from its result, as for any request
  lost in a drop). A send interrupted anywhere between its xid and its last
  byte (a signal handler that raises, an asynchronous exception) breaks the
  connection the same way, then lets the interruption go on up.
- **A holder's write, on the holder's session only.** A request bound to
  a session (``kazoo/bound.py``) is looked at under ``lock``, on a socket
  whose handshake is over: if its session is not the connection's any
  more, ``refuse`` fails it and nothing is written.
- **No send inside a send.** A signal handler runs between two bytecodes of
  the thread it interrupts, so it may run inside a direct send, after its xid
  and before its last byte. A request the handler makes must not write a
  frame of its own there (its xid would reach the wire ahead of the
  interrupted one, or its bytes inside the interrupted frame): a send from
  the thread that is writing goes through kazoo's queue, which the connection
  thread writes once the interrupted send has let go of ``lock``.

Not used with TLS, SASL or auth schemes (KazooConnection never gives a
socket then): those keep kazoo's path, which handles renegotiation and the
auth packets' ordering.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any, Protocol

from zk_recipes._client.socket_io import send_all
from zk_recipes._deadline import session_clock

_INT = struct.Struct("!i")


class _WriteTimedOut(Exception):
    """The socket stayed full for the whole timeout (the server is not reading)."""


class _PeerClosed(Exception):
    """The server closed the connection."""


class Request(Protocol):
    """A kazoo request object (duck-typed: ``type`` and ``serialize()``)."""

    type: int

    def serialize(self) -> bytes | bytearray: ...


class DirectSender:
    """Writes requests from the calling thread when it may (see the module docstring)."""

    def __init__(
        self,
        pending: Callable[[], Any],
        queue: Callable[[], Any],
        next_xid: Callable[[], int],
        on_sent: Callable[[int, int, float], None],
        refuse: Callable[[Any, Any], bool] | None = None,
    ) -> None:
        #: Held by every writer of this connection, kazoo's thread included. Reentrant:
        #: kazoo may run a result's callbacks inline while failing pending requests.
        self.lock = threading.RLock()
        # kazoo's deques of (request, result, xid) and (request, result), read at each
        # send: kazoo replaces them when a session ends.
        self._pending = pending
        self._queue = queue
        self._next_xid = next_xid
        self._on_sent = on_sent
        #: ``refuse(request, result)``: True when the request must not go out (its result
        #: failed already).
        self._refuse = refuse
        self._socket: socket.socket | None = None
        self._timeout = 0.0
        #: The thread writing a direct send now (its ident), while it holds ``lock``.
        self._writer: int | None = None
        #: Requests written directly, and writes that failed (for tests and benchmarks).
        self.sent = 0
        self.failed = 0

    def open(self, sock: socket.socket, timeout: float) -> None:
        """The handshake succeeded on ``sock``: direct sends may use it."""
        with self.lock:
            self._socket = sock
            self._timeout = timeout

    def close(self) -> None:
        """No more direct sends on this connection (it is dropping, or done)."""
        with self.lock:
            self._socket = None

    def abort(self) -> None:
        """Shut the socket down without the lock: a write stuck on it fails at once.

        For a connection that is ending anyway (kazoo is about to fail what is
        pending): the writer may hold ``lock`` for as long as its timeout.
        """
        sock = self._socket
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    @property
    def is_open(self) -> bool:
        return self._socket is not None

    def send(self, request: Request, result: Any, body: bytes | bytearray | None = None) -> bool:
        """Write ``request`` now; False when it must go through kazoo's queue instead.

        ``body`` is ``request.serialize()`` when the caller already has it (it
        checked the request's size). True means the request is pending: its
        reply, or the ConnectionLoss of a drop, will complete ``result``.
        """
        if self._socket is None:
            return False
        me = threading.get_ident()
        if self._writer == me:
            return False  # a signal handler inside our own send: kazoo's queue (module note)
        if body is None:
            body = request.serialize()  # one that cannot be serialized raises here: nothing sent
        with self.lock:
            sock = self._socket
            if sock is None or self._queue():
                return False
            if self._refuse is not None and self._refuse(request, result):
                return True  # failed unsent: its session is not the holder's any more
            self._writer = me
            try:
                xid = self._next_xid()
                packet = _INT.pack(len(body) + 8) + _INT.pack(xid) + _INT.pack(request.type) + body
                self._on_sent(xid, request.type, session_clock())
                self._pending().append((request, result, xid))
                send_all(sock, packet, self._timeout, _WriteTimedOut, _PeerClosed)
            except (OSError, ValueError, _WriteTimedOut, _PeerClosed):
                # ValueError: the socket was closed under us (kazoo's thread ended).
                self._break(sock)  # the drop fails the request: the caller reads that
            except BaseException:
                # Interrupted (a signal handler or an asynchronous exception raised in
                # this thread) somewhere between the xid and the last byte: the wire and
                # the pending list may disagree, so this connection must end too.
                self._break(sock)
                raise
            else:
                self.sent += 1
            finally:
                self._writer = None
        return True

    def _break(self, sock: socket.socket) -> None:
        self.failed += 1
        self._socket = None
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
