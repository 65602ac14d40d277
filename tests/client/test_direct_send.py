"""Callers writing their own requests (zk_recipes/_client/direct_send.py).

The rules that keep it correct, each checked here: wire order is the order
of kazoo's pending list, whatever the threads; nothing overtakes kazoo's
queue; no socket, no direct send; a failed write breaks the connection and
fails the request as a drop does, and the session goes on. And where it is
not used: TLS, auth schemes. The end-to-end net (drops, stalls, expiry and
close while many threads send; replies never matched to the wrong request)
is tests/client/test_request_path_faults.py, which runs on this path; TLS and SASL
clients are checked to keep kazoo's queue in tests/client/test_security.py.
"""

from __future__ import annotations

import collections
import signal
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from zk_recipes import ConnectionLostError, Pending, ZkClient, ZnodeStat
from zk_recipes._client import direct_send, socket_io
from zk_recipes._client.direct_send import DirectSender
from zk_recipes._client.kazoo import KazooConnection
from zk_recipes.testing.pytest_plugin import ClientFactory


class Request:
    type = 4

    def __init__(self, body: bytes) -> None:
        self.body = body

    def serialize(self) -> bytes:
        return self.body


class Rig:
    """A DirectSender on a real socket pair, with kazoo's deques and xid rule."""

    def __init__(self) -> None:
        self.ours, self.peer = socket.socketpair()
        self.ours.setblocking(False)
        self.pending: collections.deque[tuple[Any, Any, int]] = collections.deque()
        self.queue: collections.deque[tuple[Any, Any]] = collections.deque()
        self.xid = 0
        self.sent_at: dict[int, float] = {}
        self.sender = DirectSender(
            pending=lambda: self.pending,
            queue=lambda: self.queue,
            next_xid=self._next,
            on_sent=lambda xid, kind, at: self.sent_at.__setitem__(xid, at),
        )
        self.sender.open(self.ours, 1.0)

    def _next(self) -> int:
        self.xid = (self.xid % 2147483647) + 1
        return self.xid

    def frames(self, count: int) -> list[tuple[int, int, bytes]]:
        """(xid, type, body) of the next ``count`` frames the peer receives."""
        stream = self.peer.makefile("rb")
        out = []
        for _ in range(count):
            (length,) = struct.unpack("!i", stream.read(4))
            xid, kind = struct.unpack("!ii", stream.read(8))
            out.append((xid, kind, stream.read(length - 8)))
        return out

    def close(self) -> None:
        self.ours.close()
        self.peer.close()


@pytest.fixture
def rig() -> Iterator[Rig]:
    made = Rig()
    try:
        yield made
    finally:
        made.close()


def test_wire_order_is_pending_order_whatever_the_threads(rig: Rig) -> None:
    per_thread, threads = 200, 8
    frames: list[tuple[int, int, bytes]] = []
    reader = threading.Thread(target=lambda: frames.extend(rig.frames(per_thread * threads)))
    reader.start()

    def send(index: int) -> None:
        for n in range(per_thread):
            assert rig.sender.send(Request(f"t{index}-{n}".encode()), object())

    senders = [threading.Thread(target=send, args=(i,)) for i in range(threads)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join(20)
    reader.join(20)
    assert [xid for xid, _, _ in frames] == [xid for _, _, xid in rig.pending]
    assert [xid for xid, _, _ in frames] == list(range(1, per_thread * threads + 1))
    assert [body for _, _, body in frames] == [r.body for r, _, _ in rig.pending]
    assert all(kind == 4 for _, kind, _ in frames)
    # Each thread's own requests keep their order on the wire.
    for index in range(threads):
        mine = [b for _, _, b in frames if b.startswith(f"t{index}-".encode())]
        assert mine == [f"t{index}-{n}".encode() for n in range(per_thread)]
    assert set(rig.sent_at) == set(range(1, per_thread * threads + 1))
    assert rig.sender.sent == per_thread * threads


def test_nothing_overtakes_kazoos_queue(rig: Rig) -> None:
    rig.queue.append((Request(b"queued"), object()))
    assert rig.sender.send(Request(b"later"), object()) is False
    assert not rig.pending
    assert rig.xid == 0
    rig.queue.clear()
    assert rig.sender.send(Request(b"now"), object()) is True
    assert rig.frames(1) == [(1, 4, b"now")]


def test_no_socket_no_direct_send(rig: Rig) -> None:
    rig.sender.close()
    assert rig.sender.send(Request(b"x"), object()) is False
    assert not rig.pending


def test_a_request_that_cannot_be_serialized_sends_nothing(rig: Rig) -> None:
    class Bad(Request):
        def serialize(self) -> bytes:
            raise TypeError("not bytes")

    with pytest.raises(TypeError):
        rig.sender.send(Bad(b""), object())
    assert not rig.pending
    assert rig.xid == 0
    assert rig.sender.is_open


def test_an_interrupted_send_breaks_the_connection_and_raises(rig: Rig) -> None:
    class Interrupted(Exception):  # as a signal handler's exception: not a socket error
        pass

    def interrupted_xid() -> int:
        raise Interrupted

    rig.sender._next_xid = interrupted_xid
    with pytest.raises(Interrupted):
        rig.sender.send(Request(b"x"), object())
    assert rig.sender.failed == 1
    assert not rig.sender.is_open


def test_a_failed_write_breaks_the_connection(rig: Rig) -> None:
    rig.peer.close()
    result = object()
    assert rig.sender.send(Request(b"x" * 100_000), result) is True  # pending: the drop fails it
    assert [r for _, r, _ in rig.pending] == [result]
    assert rig.sender.failed == 1
    assert not rig.sender.is_open
    assert rig.sender.send(Request(b"y"), object()) is False  # kazoo's queue from now on


# -- against a real server ------------------------------------------------------------------


def _conn(client: ZkClient) -> KazooConnection:
    conn = client._conn
    assert conn is not None
    return conn


def test_requests_are_written_by_their_callers(zk_client: ZkClient) -> None:
    before = _conn(zk_client).direct_sends[0]
    zk_client.create("/direct", b"1")
    zk_client.get("/direct")
    zk_client.delete("/direct")
    assert _conn(zk_client).direct_sends[0] >= before + 3


def test_a_failed_direct_write_fails_the_request_and_the_session_goes_on(
    zk_client_factory: ClientFactory,
) -> None:
    # The test counts the client's own sends: no read of the ensemble's config at reconnect.
    client = zk_client_factory(session_timeout=4.0, track_ensemble=False)
    client.create("/kept", b"v")
    session = client.session_id
    conn = _conn(client)
    kazoo_conn = conn.kazoo_client._connection
    # Under the senders' lock kazoo's thread cannot notice the drop first: this
    # request is the write that fails.
    with conn._direct.lock:
        kazoo_conn._socket.shutdown(socket.SHUT_WR)
        pending = client.get_async("/kept")
    with pytest.raises(ConnectionLostError):
        pending.result(5)
    assert conn.direct_sends[1] == 1
    assert client.wait_connected(10)
    assert client.session_id == session
    sent = conn.direct_sends[0]
    assert client.get("/kept")[0] == b"v"
    assert conn.direct_sends[0] == sent + 1  # written by the caller again


def test_auth_schemes_keep_kazoos_queue(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory(auth=[("digest", "user:secret")])
    client.create("/authed", b"")
    assert _conn(client).direct_sends == (0, 0)


@pytest.mark.parametrize("where", ["before the first byte", "mid-frame"])
def test_a_signal_handler_that_sends_inside_a_direct_send_waits_its_turn(
    zk_client_factory: ClientFactory, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler's request must neither reach the wire ahead of the interrupted one (out of
    order xids kill kazoo's thread and the session) nor inside its frame: it queues."""
    client = zk_client_factory(session_timeout=4.0)
    client.create("/g1", b"v0")
    session, epoch = client.session_id, client.loss_epoch
    from_handler: list[Pending[ZnodeStat | None]] = []

    def handler(signum: int, frame: object) -> None:
        from_handler.append(client.exists_async("/g1"))

    previous = signal.signal(signal.SIGUSR1, handler)
    real_send_all = socket_io.send_all
    armed = [True]

    def send_all(sock: socket.socket, data: bytes, timeout: float, *errors: Any) -> None:
        if not armed[0] or threading.current_thread() is not threading.main_thread():
            real_send_all(sock, data, timeout, *errors)
            return
        armed[0] = False
        if where == "mid-frame":
            real_send_all(sock, data[: len(data) // 2], timeout, *errors)
            data = data[len(data) // 2 :]
        signal.raise_signal(signal.SIGUSR1)  # the handler runs here, inside our send
        real_send_all(sock, data, timeout, *errors)

    monkeypatch.setattr(direct_send, "send_all", send_all)
    try:
        stat = client.set("/g1", b"A" * 2000)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert stat.version == 1
    [pending] = from_handler
    found = pending.result(5)
    assert found is not None
    assert found.version == 1  # sent after the set, as it waited its turn
    assert (client.session_id, client.loss_epoch) == (session, epoch)
    assert client.get("/g1")[0] == b"A" * 2000


def test_an_unexpected_failure_of_kazoo_s_machinery_is_a_connection_loss() -> None:
    raw = _FailedResult(RuntimeError("xids do not match"))
    with pytest.raises(ConnectionLostError, match="xids do not match") as raised:
        Pending(raw, "/g1", lambda value: value).result(1)
    assert isinstance(raised.value.__cause__, RuntimeError)


class _FailedResult:
    """A kazoo async result that its connection failed with a non-kazoo exception."""

    def __init__(self, exc: Exception) -> None:
        self._exc = exc

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        raise self._exc
