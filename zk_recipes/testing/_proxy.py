"""A TCP proxy between clients and one server, to break the network without touching the server.

One daemon thread runs a ``selectors`` loop over a listening socket on a free
127.0.0.1 port, a wake-up socket pair for commands, and every proxied pair of
sockets (client side, server side). Commands (``cut``, ``blackhole``,
``drop_replies``, ``drop_requests``, ``heal``, ``close``) are queued, the loop
applies them between two selects, and the caller waits for that, so when
``cut()`` returns the connections are already gone.

Modes:

* forward: bytes are copied both ways (1 MiB buffered per direction, then the
  reader is paused); an EOF on one side closes the pair.
* cut: every connection is reset at once (``SO_LINGER`` 0 sends RST) and new
  ones are accepted and reset immediately, like a crashed host or a firewall
  sending rejects. The client notices at once.
* blackhole: a partition. Sockets stay open, every byte is read and dropped,
  new connections are accepted but never connected onward, and a close on one
  side is *not* passed to the other (the FIN is lost too). The client hears
  nothing and must time out by itself; the server keeps the connection until
  the session expires.
* drop_replies: a one-way partition. Client bytes (and a client's close) still
  reach the server, nothing comes back: the server applies a request whose
  reply is lost, and keeps the session alive on the client's pings while the
  client times out. New connections are forwarded the same way.
* stall_replies: a server that goes silent in the middle of a reply. Client
  bytes still reach the server (it keeps the session alive on the client's
  pings); of the server's bytes, the client gets the 4-byte length and half
  of the next reply (nothing more of a reply already under way), then
  nothing: a read stuck mid-packet, which only the client's own timeout can end.
* drop_requests: the other one-way partition. Server bytes still reach the
  client, client bytes are read and dropped. The server hears no request and
  no ping, so it expires the session after its timeout and closes the
  connection, and that close *does* reach the client (as it would across a
  real one-way partition), while everything the server sends before that,
  watch notifications included, keeps arriving. A client's close is lost (the
  server keeps the session until it expires); a new connection is accepted
  but never connected onward, since its connect request could not reach the
  server anyway.

``heal()`` returns to forwarding. Connections that lost bytes, lost a side or
were opened during a lossy mode (blackhole, drop_replies, drop_requests) are
reset then (their byte streams are broken), so clients reconnect cleanly;
connections that carried nothing keep working.

Size: over the house limit (tests/test_module_sizes.py): the four fault modes
(cut, black hole, dropped replies or requests, a stall) act inside one relay
loop per connection and share its bookkeeping of what each connection lost.
"""

from __future__ import annotations

import contextlib
import errno
import queue
import selectors
import socket
import struct
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import TracebackType

from zk_recipes.testing._install import HarnessError

_BUFFER_LIMIT = 1 << 20
_CHUNK = 65536
_FORWARD, _CUT, _BLACKHOLE = "forward", "cut", "blackhole"
_DROP_REPLIES, _DROP_REQUESTS = "drop_replies", "drop_requests"
_STALL_REPLIES = "stall_replies"
_CLOSE = "close"
_LOSSY = (_BLACKHOLE, _DROP_REPLIES, _DROP_REQUESTS, _STALL_REPLIES)
_FRAME_HEADER = struct.Struct(">i")


def _reset(sock: socket.socket | None) -> None:
    """Close with RST instead of FIN."""
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@dataclass(eq=False)
class _Pair:
    client: socket.socket | None
    upstream: socket.socket | None
    connecting: bool = False
    to_upstream: bytearray = field(default_factory=bytearray)
    to_client: bytearray = field(default_factory=bytearray)
    tainted: bool = False
    """Lost bytes or a side, or opened, during a lossy mode: reset on heal."""
    down_left: int = 0
    """Bytes of the server's current frame (length prefix included) not yet seen; 0 between."""
    down_header: bytearray = field(default_factory=bytearray)
    """The length prefix of the server's next frame, while it arrives."""
    stall_allow: int | None = None
    """stall_replies: server bytes still to pass on (None: not known until the next prefix)."""

    def frames(self, data: bytes) -> None:
        """Follow the server's length-prefixed frames through ``data``."""
        at = 0
        while at < len(data):
            if self.down_left:
                step = min(self.down_left, len(data) - at)
                self.down_left -= step
                at += step
                continue
            step = min(4 - len(self.down_header), len(data) - at)
            self.down_header += data[at : at + step]
            at += step
            if len(self.down_header) == 4:
                (length,) = _FRAME_HEADER.unpack(self.down_header)
                self.down_header.clear()
                self.down_left = max(0, length)

    def stalled(self, data: bytes) -> int:
        """stall_replies: how many leading bytes of ``data`` still go to the client."""
        if self.stall_allow is None:
            # Between frames when the stall began: pass the prefix and half the body.
            missing = 4 - len(self.down_header)
            if len(data) < missing:
                self.frames(data)
                return len(data)
            (length,) = _FRAME_HEADER.unpack(bytes(self.down_header) + data[:missing])
            self.stall_allow = missing + max(1, length // 2) if length > 1 else missing
        passed = min(self.stall_allow, len(data))
        self.stall_allow -= passed
        self.frames(data[:passed])
        return passed


class TcpProxy:
    """Forward ``127.0.0.1:<port>`` to ``target_host:target_port``; break it on demand.

    Point a client at ``proxy.connect_string`` instead of the server's. Call
    ``close()`` (or use ``with``) when done; it is also closed at interpreter exit.
    """

    def __init__(self, target_host: str, target_port: int, *, timeout: float = 5.0) -> None:
        self.target = (target_host, target_port)
        self._timeout = timeout
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener.setblocking(False)
        self._port: int = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._commands: queue.Queue[tuple[str, threading.Event]] = queue.Queue()
        self._selector = selectors.DefaultSelector()
        self._pairs: set[_Pair] = set()
        self._mode = _FORWARD
        self._accepted = 0
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._run, name=f"TcpProxy-{self._port}->{target_port}", daemon=True
        )
        self._thread.start()
        # No reference to self in the callback: the proxy can still be collected.
        self._finalizer = weakref.finalize(self, _shutdown, self._commands, self._wake_w)

    # -- public API

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self._port)

    @property
    def port(self) -> int:
        return self._port

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self._port}"

    @property
    def mode(self) -> str:
        """The current mode: ``"forward"``, ``"cut"``, ``"blackhole"``, ``"drop_replies"``,
        ``"stall_replies"``, ``"drop_requests"``, or ``"closed"``."""
        return "closed" if self._closed else self._mode

    @property
    def connections(self) -> int:
        """Client connections open right now."""
        with self._lock:
            return sum(1 for pair in self._pairs if pair.client is not None)

    @property
    def accepted(self) -> int:
        """Client connections accepted since the proxy started."""
        return self._accepted

    def __repr__(self) -> str:
        return (
            f"<TcpProxy {self.connect_string} -> {self.target[0]}:{self.target[1]} "
            f"{self.mode} connections={self.connections}>"
        )

    def cut(self) -> None:
        """Reset every connection now and reset new ones until ``heal()``."""
        self._command(_CUT)

    def blackhole(self) -> None:
        """Silently drop every byte both ways (a partition) until ``heal()``."""
        self._command(_BLACKHOLE)

    def drop_replies(self) -> None:
        """Forward client bytes to the server but drop every reply, until ``heal()``."""
        self._command(_DROP_REPLIES)

    def stall_replies(self) -> None:
        """Let the server fall silent in the middle of a reply, until ``heal()``.

        Client bytes still reach the server. Of the server's bytes, the client
        gets the length prefix and half of the next frame (nothing more of a
        frame under way), then nothing: its read is stuck mid-packet.
        """
        self._command(_STALL_REPLIES)

    def drop_requests(self) -> None:
        """Drop every client byte but forward the server's, until ``heal()``.

        The half of a one-way partition that ``drop_replies`` leaves out: the
        client still hears the server (watch notifications, and the close when
        the server expires the session) while the server hears nothing from it.
        """
        self._command(_DROP_REQUESTS)

    def heal(self) -> None:
        """Forward again; connections broken by a lossy mode are reset so clients reconnect."""
        self._command(_FORWARD)

    def close(self) -> None:
        """Reset every connection, stop listening and end the thread. Idempotent."""
        if self._closed:
            return
        self._command(_CLOSE)
        self._thread.join(self._timeout)
        self._finalizer.detach()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _command(self, command: str) -> None:
        if self._closed or not self._thread.is_alive():
            if command == _CLOSE:
                return
            raise HarnessError(f"{self!r} is closed")
        done = threading.Event()
        self._commands.put((command, done))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
        done.wait(self._timeout)

    # -- the loop (proxy thread only)

    def _run(self) -> None:
        sel = self._selector
        sel.register(self._listener, selectors.EVENT_READ, None)
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        try:
            while not self._closed:
                for key, events in sel.select(timeout=0.5):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        self._drain_commands()
                    elif isinstance(key.fileobj, socket.socket):
                        self._service(key.data, key.fileobj, events)
                self._update_interest()
        finally:
            self._teardown()

    def _drain_commands(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass
        while True:
            try:
                command, done = self._commands.get_nowait()
            except queue.Empty:
                return
            self._apply(command)
            done.set()

    @property
    def _upward(self) -> bool:
        """Client bytes reach the server."""
        return self._mode in (_FORWARD, _DROP_REPLIES, _STALL_REPLIES)

    @property
    def _downward(self) -> bool:
        """Server bytes reach the client (some of them while stalling)."""
        return self._mode in (_FORWARD, _DROP_REQUESTS, _STALL_REPLIES)

    def _apply(self, command: str) -> None:
        if command == _CLOSE:
            self._closed = True
            return
        previous, self._mode = self._mode, command
        for pair in list(self._pairs):
            if command == _STALL_REPLIES:
                # Mid-frame already: the client has part of it; let nothing more through.
                pair.stall_allow = 0 if pair.down_left or pair.down_header else None
            if command == _CUT or (command == _FORWARD and previous in _LOSSY and pair.tainted):
                self._drop(pair, reset=True)
                continue
            if not self._downward and pair.to_client:
                pair.tainted = True
                pair.to_client.clear()
            if not self._upward and (pair.to_upstream or pair.connecting):
                pair.tainted = True
                pair.to_upstream.clear()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            self._accepted += 1
            if self._mode == _CUT:
                _reset(client)
                continue
            client.setblocking(False)
            pair = _Pair(client=client, upstream=None)
            if not self._upward:
                pair.tainted = True
            else:
                upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                upstream.setblocking(False)
                if upstream.connect_ex(self.target) not in (
                    0,
                    errno.EINPROGRESS,
                    errno.EWOULDBLOCK,
                ):
                    upstream.close()
                    _reset(client)
                    continue
                pair.upstream, pair.connecting = upstream, True
                upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._pairs.add(pair)
            self._selector.register(client, selectors.EVENT_READ, pair)
            if pair.upstream is not None:
                self._selector.register(pair.upstream, selectors.EVENT_WRITE, pair)

    def _service(self, pair: _Pair, sock: socket.socket, events: int) -> None:
        if pair not in self._pairs:
            return
        is_client = sock is pair.client
        if not is_client and pair.connecting and events & selectors.EVENT_WRITE:
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                self._drop(pair, reset=True)
                return
            pair.connecting = False
        if events & selectors.EVENT_READ:
            try:
                data = sock.recv(_CHUNK)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                data = b""
            if data == b"":
                self._side_closed(pair, is_client)
                return
            if data:
                if is_client and self._upward:
                    pair.to_upstream.extend(data)
                elif not is_client and self._mode == _STALL_REPLIES:
                    passed = pair.stalled(data)
                    pair.to_client.extend(data[:passed])
                    if passed < len(data):
                        pair.tainted = True
                elif not is_client and self._downward:
                    pair.frames(data)
                    pair.to_client.extend(data)
                else:
                    pair.tainted = True
        if events & selectors.EVENT_WRITE and not pair.connecting:
            buffer = pair.to_client if is_client else pair.to_upstream
            if buffer:
                try:
                    sent = sock.send(buffer)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError:
                    self._drop(pair, reset=True)
                    return
                del buffer[:sent]

    def _side_closed(self, pair: _Pair, is_client: bool) -> None:
        if self._upward if is_client else self._downward:
            # Pass what is buffered on, then close both sides gracefully.
            other = pair.upstream if is_client else pair.client
            pending = pair.to_upstream if is_client else pair.to_client
            if other is not None and pending and not pair.connecting:
                with contextlib.suppress(OSError):
                    other.send(pending)
            self._drop(pair, reset=False)
            return
        # A partition loses the FIN too: close only the side that went away.
        pair.tainted = True
        dead = pair.client if is_client else pair.upstream
        if dead is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(dead)
            dead.close()
        with self._lock:
            if is_client:
                pair.client = None
            else:
                pair.upstream = None
        if pair.client is None and pair.upstream is None:
            self._drop(pair, reset=False)

    def _drop(self, pair: _Pair, *, reset: bool) -> None:
        with self._lock:
            self._pairs.discard(pair)
        for sock in (pair.client, pair.upstream):
            if sock is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
            if reset:
                _reset(sock)
            else:
                sock.close()
        pair.client = pair.upstream = None

    def _update_interest(self) -> None:
        """Watch for reads unless the other side's buffer is full; for writes when due."""
        read, write = selectors.EVENT_READ, selectors.EVENT_WRITE
        up, down = self._upward, self._downward
        for pair in list(self._pairs):
            # (socket, do its reads travel on?, their buffer, do writes to it travel?, its buffer)
            for sock, reads_travel, inbound, writes_travel, outbound in (
                (pair.client, up, pair.to_upstream, down, pair.to_client),
                (pair.upstream, down, pair.to_client, up, pair.to_upstream),
            ):
                if sock is None:
                    continue
                if sock is pair.upstream and pair.connecting:
                    wanted = write
                else:
                    # Dropped bytes are read (and discarded) at any rate; forwarded ones wait
                    # while the other side's buffer is full.
                    full = reads_travel and len(inbound) >= _BUFFER_LIMIT
                    wanted = 0 if full else read
                    if writes_travel and outbound:
                        wanted |= write
                try:
                    current = self._selector.get_key(sock).events
                except KeyError:
                    current = 0
                if wanted == current:
                    continue
                if wanted == 0:
                    self._selector.unregister(sock)
                elif current == 0:
                    self._selector.register(sock, wanted, pair)
                else:
                    self._selector.modify(sock, wanted, pair)

    def _teardown(self) -> None:
        self._closed = True
        for pair in list(self._pairs):
            self._drop(pair, reset=True)
        for sock in (self._listener, self._wake_r):
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
            sock.close()
        self._selector.close()
        self._wake_w.close()
        while True:  # release anyone waiting on a command
            try:
                self._commands.get_nowait()[1].set()
            except queue.Empty:
                break


def _shutdown(commands: queue.Queue[tuple[str, threading.Event]], wake: socket.socket) -> None:
    commands.put((_CLOSE, threading.Event()))
    with contextlib.suppress(OSError):
        wake.send(b"\0")


def proxied_connect_string(proxies: Iterable[TcpProxy]) -> str:
    """``"127.0.0.1:p1,127.0.0.1:p2,..."`` for a client that should go through these proxies."""
    return ",".join(proxy.connect_string for proxy in proxies)


__all__ = ["TcpProxy", "proxied_connect_string"]
