"""The hooks over kazoo's private attributes: every one of them, listed in one place.

kazoo 2.11 gives no public way to do what the client needs on its connection
thread, so these replace attributes of its private connection object. A
kazoo upgrade must re-read each of them (kazoo is pinned to 2.11.x for it):

- ``KazooClient._connection._submit``: a write's (or sync's) send time, kept by xid;
- ``._read_header``: a reply to one of those proves the quorum heard us;
- ``._connect``: per-connection bookkeeping (``KazooClient.last_zxid`` as the
  attempt starts: what the server's diff is relative to), and how each
  attempt ended (``refused_everywhere``);
- ``._invoke``: the negotiated timeout and the socket for direct sends, read
  from the handshake's reply before anyone hears CONNECTED;
- ``._send_request`` / ``._send_ping``: kazoo's writers take the direct
  senders' lock, so writes never interleave; a queued write bound to a
  holder's session that is not the connection's any more is failed and
  dropped there, unwritten (``bound.py``);
- ``._connect_attempt``: a connection that ends takes the socket from direct senders;
- ``._read`` / ``._write``: read and write first, wait only on EAGAIN (socket_io);
- ``KazooClient._notify_pending``: a direct write stuck on a full socket fails
  at once when the connection drops;
- ``KazooClient.handler.dispatch_callback``: internal wake-ups run on the
  connection thread, in the order read (``mark_inline``);
- ``._read_watch_event``: a notification goes to our persistent watchers
  (``watches.PersistentRouter``, which may make a CHILD of the parent from
  it) before kazoo's one-shot ones (kazoo's
  ``_stopped`` and ``_state`` are read there as kazoo's own code reads them);
- ``KazooClient._data_watchers`` / ``._child_watchers``: kazoo's one-shot
  watchers by path, looked at before a ``removeWatches``, and a path's data
  watchers popped (on the connection thread) when one is taken back
  (``connection.forget_data_watch``);
- used by ``connection``, not replaced: ``_connection._socket`` (the
  connected address), ``._xid`` (a direct send takes the next one),
  ``._write_sock`` (the wake-up socket: made non-blocking before ``stop()``;
  a byte on it after queueing kazoo's private ``_SESSION_EXPIRED`` marker
  makes it drop the session, ``expire_now()``); ``KazooClient._pending`` and
  ``._queue`` (direct sends only when nothing waits; ``_admit``), ``._call``
  (a request through kazoo's queue), ``._session_id`` and
  ``._session_passwd`` (resuming, abandoning), ``handler.select`` (set to
  ``poll_select``).

These closures are KazooConnection's other half: they keep its bookkeeping
(``_sent``, ``_connect_from``, ``_proving``, ``negotiated_timeout``) from
kazoo's thread, so they reach its underscored attributes as its methods would.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import Any, Protocol

from kazoo.protocol.serialization import Connect, Watch
from kazoo.protocol.states import EVENT_TYPE_MAP, Callback, EventType, WatchedEvent

from zk_recipes._client.direct_send import DirectSender
from zk_recipes._client.kazoo.bound import refused
from zk_recipes._client.kazoo.failures import broken, dropped, read_timed_out, write_timed_out
from zk_recipes._client.kazoo.records import THROUGH_THE_LEADER
from zk_recipes._client.kazoo.watches import PersistentRouter
from zk_recipes._client.socket_io import read_exactly, send_all
from zk_recipes._deadline import session_clock
from zk_recipes._types import is_inline

log = logging.getLogger("zk_recipes.client")


class Hooked(Protocol):
    """What the hooks keep on the connection they are put on (KazooConnection)."""

    _kz: Any
    _direct: DirectSender
    _direct_allowed: bool
    #: xid -> send time of a write or sync, until its reply is read.
    _sent: dict[int, float]
    _proving: Any
    _connect_from: tuple[float, int | None]
    _zxid_before: int
    _router: PersistentRouter
    negotiated_timeout: float | None
    #: Connections that came up so far (moved on kazoo's thread, at CONNECTED).
    generation: int

    def _count_refusal(self, address: tuple[str, int], exc: BaseException | None) -> None: ...

    def _heard(self, sent_at: float) -> None: ...

    def _kazoo_listener(self, state: Any) -> None: ...


def install_hooks(connection: Hooked) -> None:
    """Put our hooks on ``connection``'s KazooClient (once, before it starts)."""
    conn = connection._kz._connection
    submit = conn._submit
    read_header = conn._read_header
    connect = conn._connect
    invoke = conn._invoke
    read = conn._read
    write = conn._write
    send_request = conn._send_request
    send_ping = conn._send_ping
    connect_attempt = conn._connect_attempt
    notify_pending = connection._kz._notify_pending
    direct = connection._direct
    sent = connection._sent

    def _submit(request: Any, timeout: float, xid: int | None = None) -> Any:
        if xid is not None and xid > 0 and request.type in THROUGH_THE_LEADER:
            sent[xid] = session_clock()
        return submit(request, timeout, xid)

    def _read_header(timeout: float) -> Any:
        header = read_header(timeout)
        # Only the reply to a request that went through the leader proves the
        # quorum heard us, as of when we sent it: pings, reads, watch events
        # (WATCH_XID) and auth packets prove nothing (the module note).
        xid = header[0].xid
        if xid > 0:
            at = sent.pop(xid, None)
            if at is not None:
                connection._heard(at)
        return header

    def _connect(host: str, hostip: str, port: int) -> Any:
        direct.close()
        sent.clear()  # xids restart at 1 on every connection
        connection._proving = None  # a sync of the old connection is answered by nobody
        connection._connect_from = (session_clock(), connection._kz._session_id)
        # The newest zxid any reply carried before this connection: nothing of it
        # has been read yet (the Java client's relativeZxid for setWatches).
        connection._zxid_before = connection._kz.last_zxid
        try:
            read_timeout, connect_timeout = connect(host, hostip, port)
        except BaseException as exc:
            connection._count_refusal((hostip, port), exc)
            raise
        connection._count_refusal((hostip, port), None)
        sent.clear()  # the handshake's own xids (SASL) are not requests of ours
        return read_timeout, connect_timeout

    # kazoo's own writers take the direct senders' lock, so writes never interleave
    # and _pending keeps wire order; a connection that drops or ends takes the
    # socket away from direct senders before kazoo fails what is pending.
    def _invoke(timeout: float, request: Any, xid: int | None = None) -> Any:
        result = invoke(timeout, request, xid)
        if xid is None and isinstance(request, Connect):
            # kazoo tells CONNECTED before its _connect returns (and keeps only
            # timeouts derived from the negotiated one), so what must hold by the
            # time anyone hears CONNECTED is set here, from the handshake's reply:
            # the negotiated timeout, and the socket for direct sends. Direct sends
            # need no SASL and no auth (_direct_allowed), which are all kazoo's
            # _connect still does after it, and a read-write server.
            reply = result[0]
            connection.negotiated_timeout = reply.time_out / 1000.0
            sock = conn._socket
            if connection._direct_allowed and not reply.read_only and type(sock) is socket.socket:
                # A write may wait for a full socket no longer than kazoo waits
                # between pings (a third of the timeout), nor than its own connect
                # timeout: kazoo's thread needs the senders' lock to ping.
                connect_timeout = reply.time_out / len(connection._kz.hosts)
                direct.open(sock, min(connect_timeout, reply.time_out / 3) / 1000.0)
        return result

    def _send_request(read_timeout: float, connect_timeout: float) -> Any:
        with direct.lock:
            queue = connection._kz._queue
            head = queue[0] if queue else None
            if head is not None and refused(head[0], head[1]):
                # Its holder's session ended: not written. One wake-up byte was sent
                # with it; read it back, as kazoo does for a request it writes.
                queue.popleft()
                with contextlib.suppress(OSError):
                    conn._read_sock.recv(1)
                return None
            return send_request(read_timeout, connect_timeout)

    def _send_ping(connect_timeout: float) -> Any:
        with direct.lock:
            return send_ping(connect_timeout)

    def _connect_attempt(*args: Any, **kwargs: Any) -> Any:
        try:
            return connect_attempt(*args, **kwargs)
        finally:
            direct.close()

    def _notify_pending(state: Any) -> None:
        # A direct write stuck on a full socket holds the lock: shut the socket
        # first, without it, so that write fails at once and kazoo goes on to
        # SUSPENDED now, not when the write's timeout ends.
        direct.abort()
        with direct.lock:
            direct.close()
            notify_pending(state)

    def _read(length: int, timeout: float) -> bytes:
        sock = conn._socket
        if type(sock) is not socket.socket:  # TLS: kazoo's path knows pending()
            return read(length, timeout)  # type: ignore[no-any-return]
        try:
            return read_exactly(sock, length, timeout, read_timed_out, broken)
        except OSError as exc:
            raise dropped(exc) from exc

    def _write(message: bytes, timeout: float) -> None:
        sock = conn._socket
        if type(sock) is not socket.socket:
            write(message, timeout)
            return
        try:
            send_all(sock, message, timeout, write_timed_out, broken)
        except OSError as exc:
            raise dropped(exc) from exc

    handler = connection._kz.handler
    dispatch = handler.dispatch_callback

    def _dispatch_callback(callback: Any) -> Any:
        # Our internal wake-ups run here, on the connection thread, in the order
        # kazoo read them; everything else goes to kazoo's worker (mark_inline).
        if callback.type == "watch" and is_inline(callback.func):
            try:
                callback.func(*callback.args)
            except Exception:
                log.exception("error in an internal watch callback")
            return None
        return dispatch(callback)

    router = connection._router
    router.generation = lambda: connection.generation  # moved on this thread, at CONNECTED
    read_watch_event = conn._read_watch_event
    client = connection._kz

    def _read_watch_event(buffer: bytes, offset: int) -> Any:
        # Persistent watchers first (never popped: watches.py), then kazoo's one-shot
        # ones; both through the same dispatch, so every watcher sees wire order.
        if router.empty:  # a lock waiter's wake-up: nothing more to decode
            return read_watch_event(buffer, offset)
        watch, _ = Watch.deserialize(buffer, offset)
        fires = router.route(watch.type, watch.path)
        made = router.made_child(watch.type, watch.path)
        if (fires or made) and not client._stopped.is_set():
            event = WatchedEvent(EVENT_TYPE_MAP[watch.type], client._state, watch.path)
            for fire in fires:
                handler.dispatch_callback(Callback("watch", fire, (event,)))
            if made is not None:  # after the child's own event, as the server orders them
                parent, exact = made
                child = WatchedEvent(EventType.CHILD, client._state, parent)
                for fire in exact:
                    handler.dispatch_callback(Callback("watch", fire, (child,)))
        path = watch.path
        if path not in client._data_watchers and path not in client._child_watchers:
            # kazoo would decode the event again to find no one-shot watcher of its own
            # (they are added on this thread, as their replies are read: none is missed).
            return None
        return read_watch_event(buffer, offset)

    handler.dispatch_callback = _dispatch_callback
    conn._read_watch_event = _read_watch_event
    conn._submit = _submit
    conn._read_header = _read_header
    conn._connect = _connect
    conn._invoke = _invoke
    conn._send_request = _send_request
    conn._send_ping = _send_ping
    conn._connect_attempt = _connect_attempt
    connection._kz._notify_pending = _notify_pending
    # Read and write first, wait only on EAGAIN (socket_io's docstring).
    conn._read = _read
    conn._write = _write
    connection._kz.add_listener(connection._kazoo_listener)
