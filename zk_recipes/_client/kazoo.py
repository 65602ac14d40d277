"""The one place that talks to kazoo: a typed adapter around a KazooClient.

kazoo is untyped and its private connection internals are what we need to
reach, so every ``Any`` and every reach into kazoo stops in this file
(kazoo is pinned to 2.11.x in pyproject for that reason).

What it adds to kazoo:

- CONTAINER and TTL creates (opcodes 19 and 21, flags 4/5/6), which kazoo
  2.11 cannot send. Both answer with a Create2Response (path + stat).
- **Proof that the quorum heard us**, for the client's simulated expiry
  (_client/session.py). ``last_heard`` is the *send* time of the newest
  request whose reply proves the ensemble's leader handled it: a write or a
  sync, which a follower must forward to the leader (and a resumed session's
  handshake, which the leader revalidates). The leader received such a
  request no earlier than we sent it, from a follower that was in touch with
  it, so it heard of our session since then. Nothing else moves it: not a
  read or a ping, which a follower answers alone (a follower cut off from the
  quorum keeps answering them for ``syncLimit * tickTime`` while the leader
  expires our session), not a watch notification (under a one-way partition
  it keeps arriving while the server stops hearing us), not an auth packet.
  ``prove()`` sends a sync when nothing has proved the session lately (the
  session watchdog asks for it). The send time of each such request is kept
  by xid, from ``_submit`` until its reply's header is read.
- The negotiated session timeout, read from the handshake's reply (kazoo
  keeps only derived timeouts, and tells CONNECTED before it returns them).
- ``abandon_session()`` / ``expire_now()``: make kazoo build a brand-new
  session instead of resuming the old one, for simulated expiry.
- Error translation: kazoo exceptions become zk_recipes errors, with
  messages from one table.
- **The lean request path** (docs/request-path.md): the hooks that put
  poll_select, socket_io and direct_send on kazoo's connection, and the
  internal wake-ups that skip kazoo's watch worker (``mark_inline``). Those
  three modules hold the logic and never import kazoo; this file only wires
  them to kazoo's internals.

Size: over the house limit (tests/test_module_sizes.py): this is the one file allowed
to import kazoo, so every reach into it — hooks, wire requests, error
translation, typed requests — must live here; splitting it would make a
second kazoo importer.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import kazoo.exceptions as kz_exc
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionDropped
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.connection import _SESSION_EXPIRED
from kazoo.protocol.serialization import (
    CheckVersion,
    Connect,
    Create,
    Create2,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Reconfig,
    SetACL,
    SetData,
    Sync,
    Transaction,
    long_struct,
)
from kazoo.protocol.states import EventType, KazooState, KeeperState
from kazoo.retry import KazooRetry
from kazoo.security import ACL, Id

from zk_recipes import _errors as errors, _paths
from zk_recipes._client.direct_send import DirectSender
from zk_recipes._client.poll_select import poll_select
from zk_recipes._client.resolve import check_hosts_resolve
from zk_recipes._client.socket_io import read_exactly, send_all
from zk_recipes._deadline import session_clock
from zk_recipes._settings import ClientSettings
from zk_recipes._threads import run_in_thread
from zk_recipes._types import (
    OPEN_ACL_UNSAFE,
    Acl,
    CreateMode,
    WatchCallback,
    WatchEvent,
    WatchEventType,
    ZnodeStat,
    is_inline,
    mark_inline,
)

log = logging.getLogger("zk_recipes.client")

T = TypeVar("T")
U = TypeVar("U")


_EVENT_TYPES = {
    EventType.CREATED: WatchEventType.CREATED,
    EventType.DELETED: WatchEventType.DELETED,
    EventType.CHANGED: WatchEventType.CHANGED,
    EventType.CHILD: WatchEventType.CHILD,
    EventType.NONE: WatchEventType.NONE,
}


def _stat(raw: Any) -> ZnodeStat:
    return ZnodeStat(
        raw.czxid,
        raw.mzxid,
        raw.ctime,
        raw.mtime,
        raw.version,
        raw.cversion,
        raw.aversion,
        raw.ephemeralOwner,
        raw.dataLength,
        raw.numChildren,
        raw.pzxid,
    )


#: Requests kazoo may hold queued while disconnected (see KazooConnection._admit); a
#: socket pair holds a few hundred 1-byte wake-ups before a writer blocks.
_MAX_QUEUED_DISCONNECTED = 128


#: Requests whose reply proves the ensemble's leader handled them: writes and syncs,
#: which a follower forwards to the leader. Reads and pings a follower answers alone.
_THROUGH_THE_LEADER = frozenset(
    {
        Create.type,
        Create2.type,
        Delete.type,
        SetData.type,
        SetACL.type,
        Sync.type,
        Transaction.type,
        Reconfig.type,
        19,  # createContainer (_CreateContainer)
        21,  # createTTL (_CreateTTL)
    }
)


class _CreateContainer(namedtuple("_CreateContainer", "path data acl flags")):
    """createContainer (opcode 19): a CreateRequest with flags=4, answered by a Create2Response."""

    type = 19
    serialize = Create2.serialize
    deserialize = Create2.deserialize


class _CreateTTL(namedtuple("_CreateTTL", "path data acl flags ttl")):
    """createTTL (opcode 21): CreateTTLRequest = CreateRequest + int64 ttl (ms)."""

    type = 21
    deserialize = Create2.deserialize

    def serialize(self) -> bytearray:
        b: bytearray = Create2.serialize(self)
        b.extend(long_struct.pack(self.ttl))
        return b


#: A request's xid and type, which the server counts in its length with the body.
_HEADER_BYTES = 8
#: How messages name a request, by opcode.
_REQUEST_NAMES = {
    Create.type: "create",
    Create2.type: "create",
    19: "create",
    21: "create",
    Delete.type: "delete",
    Exists.type: "exists",
    GetData.type: "get",
    SetData.type: "set",
    GetChildren.type: "get_children",
    Sync.type: "sync",
    SetACL.type: "set_acl",
    Transaction.type: "multi",
}


#: kazoo's answer about one node -> (our error, message). The messages live here,
#: not in the errors' docstrings: users match on them, docstrings get edited.
_NODE_ERRORS: tuple[tuple[type[BaseException], type[errors.NodeError], str], ...] = (
    (kz_exc.NoNodeError, errors.NoNodeError, "{path} does not exist (for a create: its parent)"),
    (kz_exc.NodeExistsError, errors.NodeExistsError, "{path} already exists"),
    (
        kz_exc.BadVersionError,
        errors.BadVersionError,
        "{path} changed since it was read (its version is not the one given)",
    ),
    (kz_exc.NotEmptyError, errors.NotEmptyError, "{path} has children and cannot be deleted"),
    (
        kz_exc.NoAuthError,
        errors.NoAuthError,
        "not allowed on {path}: check the client's auth= / sasl= credentials against the "
        "node's ACL (or the default_acl the node was created with)",
    ),
    (
        kz_exc.NoChildrenForEphemeralsError,
        errors.NoChildrenForEphemeralsError,
        "cannot create {path}: a parent of it is an EPHEMERAL node; recipe directories "
        "need persistent (or container) parents, so pick a path outside ephemeral nodes",
    ),
)


def translate(
    exc: BaseException, path: str | None = None, *, stopped: bool = True
) -> errors.ZkRecipesError:
    """The zk_recipes error for a kazoo (or handler) exception.

    ``stopped``: whether we stopped this kazoo client ourselves; a kazoo client
    closed behind our back (its connection thread died) is a lost connection
    that the client is re-establishing, not a closed client.
    """
    where = path or "request"
    for kz_type, ours, message in _NODE_ERRORS:
        if isinstance(exc, kz_type):
            return ours(message.format(path=path), path)
    if isinstance(exc, kz_exc.SessionExpiredError):
        return errors.SessionLost(f"the ZooKeeper session expired ({where})")
    if isinstance(exc, (kz_exc.OperationTimeoutError, KazooTimeoutError)):
        return errors.OperationTimeoutError(f"ZooKeeper did not answer in time ({where})")
    if isinstance(exc, kz_exc.SessionMovedError):
        return errors.SessionMovedError(f"the session moved to another server ({where})")
    if isinstance(exc, (kz_exc.ConnectionLoss, kz_exc.ConnectionDropped)):
        return errors.ConnectionLostError(f"connection to ZooKeeper lost ({where})")
    if isinstance(exc, kz_exc.ConnectionClosedError):
        if not stopped:
            return errors.ConnectionLostError(
                f"the connection to ZooKeeper ended and is being re-established ({where})"
            )
        return errors.ClientStateError("the client is closed; start() it or make a new one")
    if isinstance(exc, kz_exc.AuthFailedError):
        return errors.ConfigurationError(
            "ZooKeeper rejected the client's credentials (AUTH_FAILED); check auth/sasl settings"
        )
    if isinstance(exc, kz_exc.UnimplementedError):
        return errors.UnsupportedFeatureError(
            f"the server does not implement this request ({path})"
        )
    if isinstance(exc, kz_exc.InvalidACLError):
        return errors.ConfigurationError(f"invalid ACL for {path}")
    return errors.ZkRecipesError(f"ZooKeeper error on {where}: {exc!r}")


class Pending(Generic[T]):
    """A request in flight (kazoo's async result), typed."""

    __slots__ = ("_conn", "_convert", "_path", "_raw")

    def __init__(
        self,
        raw: Any,
        path: str,
        convert: Callable[[Any], T],
        conn: KazooConnection | None = None,
    ) -> None:
        self._raw = raw
        self._path = path
        self._convert = convert
        self._conn = conn

    def result(self, timeout: float | None = None) -> T:
        conn = self._conn
        stopped = conn is None or conn.stopping
        # Once per request: a try, not a context manager.
        try:
            raw = self._raw.get(block=True, timeout=timeout)
        except errors.ZkRecipesError:
            raise
        except (kz_exc.KazooException, KazooTimeoutError) as exc:
            raise translate(exc, self._path, stopped=stopped) from exc
        except Exception as exc:
            # kazoo's own machinery failed the request (its connection thread died on
            # a reply it did not expect, say): its fate is unknown, as after a drop.
            raise errors.ConnectionLostError(
                f"the connection failed this request ({self._path}): {exc!r}"
            ) from exc
        return self._convert(raw)

    def done(self) -> bool:
        return bool(self._raw.ready())

    def map(self, fn: Callable[[T], U]) -> Pending[U]:
        """The same request, with ``fn`` applied to its result."""
        convert = self._convert
        return Pending(self._raw, self._path, lambda raw: fn(convert(raw)), self._conn)

    def add_done_callback(self, fn: Callable[[Pending[T]], object]) -> None:
        """Call ``fn(self)`` when the reply arrives (on kazoo's completion thread: be quick)."""
        self._raw.rawlink(lambda _raw: fn(self))


def _read_timed_out() -> BaseException:
    error: BaseException = KazooTimeoutError("socket time-out during read")
    return error


def _write_timed_out() -> BaseException:
    error: BaseException = KazooTimeoutError("socket time-out during write")
    return error


def _broken() -> BaseException:
    error: BaseException = ConnectionDropped("socket connection broken")
    return error


def _dropped(exc: OSError) -> BaseException:
    """A socket error as kazoo's ``_socket_error_handling`` reports it."""
    error: BaseException = ConnectionDropped(f"socket connection error: {exc.strerror or exc}")
    return error


def _kazoo_acl(acl: Sequence[Acl]) -> list[Any]:
    return [ACL(int(a.perms), Id(a.scheme, a.id)) for a in acl]


#: The starts of kazoo's per-attempt lines from its connection loop: logged at
#: DEBUG, not WARNING. An unreachable ensemble made ~35 of them before a
#: command's own one-line answer; the client says each state change once, at
#: WARNING when it went bad, with the newest of these as its reason
#: (``SessionTracker._log_state``, ``ConnectTimeoutError``, ``UnavailableError``).
#: How often a start looks whether ``abort_start()`` was called.
_START_STEP = 0.1

_PER_ATTEMPT = (
    "Connection dropped",
    "Connection time-out",
    "Transition to CONNECTING",
    "Cannot resolve",
    "Session has expired",
    "AUTH_FAILED closing",
    "Found a RW server",
    "Failed connecting to Zookeeper",
)


class _RecordingLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """kazoo's logger: remembers the last problem of its connection, says it at DEBUG."""

    message = ""

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if level < logging.WARNING:
            # kazoo logs every packet at BLATHER and DEBUG: one check, nothing formatted.
            if self.logger.isEnabledFor(level):
                super().log(level, msg, *args, **kwargs)
            return
        text = ""
        with contextlib.suppress(Exception):
            text = str(msg) % args if args else str(msg)
            if not text.startswith(("Failed connecting to Zookeeper", "Transition to")):
                self.message = text[:300]  # not kazoo's own farewell on stop()
        if level < logging.ERROR and text.startswith(_PER_ATTEMPT):
            level = logging.DEBUG
            if not self.logger.isEnabledFor(level):
                return
        super().log(level, msg, *args, **kwargs)


#: kazoo's raw state hook: (connection, kind, session_id) with kind one of
#: CONNECTED, READ_ONLY, SUSPENDED, EXPIRED, CLOSED, AUTH_FAILED. CLOSED here
#: always means kazoo's connection thread ended on its own (auth failure, an
#: unexpected error): after ``stop()`` the hook is not called any more.
RawStateHook = Callable[["KazooConnection", str, int], None]


class KazooConnection:
    """One KazooClient, its connection hooks, and typed requests (paths are absolute)."""

    def __init__(
        self,
        settings: ClientSettings,
        on_state: RawStateHook,
        *,
        event_path: Callable[[str], str] | None = None,
    ) -> None:
        self._settings = settings
        self._on_state = on_state
        #: Maps a server path to the one watch callbacks see (the client strips its namespace).
        self._event_path = event_path
        tls = settings.tls
        self._kz_kwargs: dict[str, Any] = dict(
            hosts=settings.hosts,
            timeout=settings.session_timeout,
            auth_data=list(settings.auth) or None,
            sasl_options=dict(settings.sasl) if settings.sasl else None,
            read_only=settings.read_only or None,
            # Reconnect forever with capped back-off; giving up is the client's decision.
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=0.5),
            use_ssl=tls is not None,
        )
        if tls is not None:
            self._kz_kwargs.update(
                ca=tls.ca_file,
                certfile=tls.cert_file,
                keyfile=tls.key_file,
                keyfile_password=tls.key_password,
                verify_certs=tls.verify_certs,
                check_hostname=tls.check_hostname,
            )
        # kazoo logs why each connection attempt failed (refused, TLS handshake,
        # ...) and tells callers only "timed out"; keep the last reason so
        # ConnectTimeoutError can say it.
        self._last_problem = _RecordingLogger(logging.getLogger("kazoo.client"))
        self._kz: Any = KazooClient(**self._kz_kwargs, logger=self._last_problem)
        # One poll(2) per wait instead of an epoll object per call (poll_select's docstring).
        self._kz.handler.select = poll_select
        self._acl = _kazoo_acl(settings.default_acl or OPEN_ACL_UNSAFE)
        self._max_request = _paths.max_request_bytes(settings.max_data_bytes)
        #: Send time of the newest request or ping whose reply arrived (see the module
        #: note), on ``session_clock`` (it counts a suspended machine's sleep too).
        self.last_heard = session_clock()
        self.negotiated_timeout: float | None = None
        #: True once stop() was called (by us): kazoo's CLOSED is then expected.
        self.stopping = False
        self._sent: dict[int, float] = {}  # xid -> send time, until its reply is read
        #: The sync ``prove()`` sent that is not answered yet (one at a time).
        self._proving: Any = None
        #: Syncs sent by ``prove()`` so far (benchmarks subtract them from server counts).
        self.proof_syncs = 0
        self._connect_from: tuple[float, int | None] = (self.last_heard, None)
        # Callers write their own requests while nothing is queued (direct_send's
        # docstring); TLS, SASL, auth schemes and read-only mode keep kazoo's path.
        self._direct = DirectSender(
            pending=lambda: self._kz._pending,
            queue=lambda: self._kz._queue,
            next_xid=self._next_xid,
            on_sent=self._on_direct_send,
        )
        self._direct_allowed = (
            tls is None and not settings.sasl and not settings.auth and not settings.read_only
        )
        self._aborted = threading.Event()
        #: Addresses that refused a connection since the last attempt that did not.
        self._refused: set[tuple[str, int]] = set()
        #: True once kazoo came back to an address that refused, every attempt in
        #: between refused too: a whole round of the servers said "nobody listens here".
        self.refused_everywhere = False
        self._install_hooks()

    @property
    def last_problem(self) -> str:
        """kazoo's last warning about this connection (why it dropped or could not connect)."""
        return self._last_problem.message

    def _count_refusal(self, address: tuple[str, int], exc: BaseException | None) -> None:
        """Note how an attempt on ``address`` ended, for ``refused_everywhere``.

        kazoo tries every address of the hosts once per round, so an address
        that refused coming round again, with only refusals since, means a
        whole round found nothing listening: a stopped ensemble or a wrong
        port, not a slow network. Anything else (a time-out, a handshake)
        starts the count again.
        """
        refused = isinstance(exc, ConnectionDropped) and isinstance(
            exc.__context__, ConnectionRefusedError
        )
        if not refused:
            self._refused.clear()
            self.refused_everywhere = False
        elif address in self._refused:
            self.refused_everywhere = True
        else:
            self._refused.add(address)

    # -- hooks (kazoo's connection thread) -------------------------------
    def _install_hooks(self) -> None:
        conn = self._kz._connection
        submit = conn._submit
        read_header = conn._read_header
        connect = conn._connect
        invoke = conn._invoke
        read = conn._read
        write = conn._write
        send_request = conn._send_request
        send_ping = conn._send_ping
        connect_attempt = conn._connect_attempt
        notify_pending = self._kz._notify_pending
        direct = self._direct
        sent = self._sent

        def _submit(request: Any, timeout: float, xid: int | None = None) -> Any:
            if xid is not None and xid > 0 and request.type in _THROUGH_THE_LEADER:
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
                    self._heard(at)
            return header

        def _connect(host: str, hostip: str, port: int) -> Any:
            direct.close()
            sent.clear()  # xids restart at 1 on every connection
            self._proving = None  # a sync of the old connection is answered by nobody
            self._connect_from = (session_clock(), self._kz._session_id)
            try:
                read_timeout, connect_timeout = connect(host, hostip, port)
            except BaseException as exc:
                self._count_refusal((hostip, port), exc)
                raise
            self._count_refusal((hostip, port), None)
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
                self.negotiated_timeout = reply.time_out / 1000.0
                sock = conn._socket
                if self._direct_allowed and not reply.read_only and type(sock) is socket.socket:
                    # A write may wait for a full socket no longer than kazoo waits
                    # between pings (a third of the timeout), nor than its own connect
                    # timeout: kazoo's thread needs the senders' lock to ping.
                    connect_timeout = reply.time_out / len(self._kz.hosts)
                    direct.open(sock, min(connect_timeout, reply.time_out / 3) / 1000.0)
            return result

        def _send_request(read_timeout: float, connect_timeout: float) -> Any:
            with direct.lock:
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
                return read_exactly(sock, length, timeout, _read_timed_out, _broken)
            except OSError as exc:
                raise _dropped(exc) from exc

        def _write(message: bytes, timeout: float) -> None:
            sock = conn._socket
            if type(sock) is not socket.socket:
                write(message, timeout)
                return
            try:
                send_all(sock, message, timeout, _write_timed_out, _broken)
            except OSError as exc:
                raise _dropped(exc) from exc

        handler = self._kz.handler
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

        handler.dispatch_callback = _dispatch_callback
        conn._submit = _submit
        conn._read_header = _read_header
        conn._connect = _connect
        conn._invoke = _invoke
        conn._send_request = _send_request
        conn._send_ping = _send_ping
        conn._connect_attempt = _connect_attempt
        self._kz._notify_pending = _notify_pending
        # Read and write first, wait only on EAGAIN (socket_io's docstring).
        conn._read = _read
        conn._write = _write
        self._kz.add_listener(self._kazoo_listener)

    def _next_xid(self) -> int:
        """kazoo's next request xid (its own rule); called under the direct senders' lock."""
        conn = self._kz._connection
        xid: int = (conn._xid % 2147483647) + 1
        conn._xid = xid
        return xid

    def oldest_unanswered(self) -> float | None:
        """When the oldest write or sync still waiting for a reply was sent (``session_clock``)."""
        waiting = list(self._sent.values())  # a copy made under the GIL: kazoo's thread pops
        return min(waiting) if waiting else None

    def _on_direct_send(self, xid: int, kind: int, at: float) -> None:
        if kind in _THROUGH_THE_LEADER:
            self._sent[xid] = at

    def prove(self) -> None:
        """Send a sync (through kazoo's queue), unless one is in flight: its reply proves
        the quorum heard us (the module note). Never blocks the caller."""
        if self._proving is not None:
            return
        raw = self._kz.handler.async_result()
        self._proving = raw
        self.proof_syncs += 1

        def answered(_raw: Any) -> None:
            if self._proving is raw:
                self._proving = None

        raw.rawlink(answered)
        try:
            self._admit("/")
            sent = self._kz._call(Sync("/"), raw)
        except Exception:  # not connected, or the queue is full: the next turn tries again
            sent = False
        if sent is False:
            self._proving = None

    @property
    def direct_sends(self) -> tuple[int, int]:
        """(requests written by their callers, direct writes that failed) so far."""
        return self._direct.sent, self._direct.failed

    def _connected_now(self) -> None:
        """The handshake answered: what it proves about when the server heard us."""
        self._last_problem.message = ""  # a problem is news only until the next connection
        started, resuming = self._connect_from
        if resuming and self._kz._session_id == resuming:
            # A resumed session, with holds perhaps: the server heard us no
            # earlier than we sent the ConnectRequest, and that is all we know.
            self._heard(started)
        else:
            # A new session holds nothing yet: every hold it will carry comes from
            # a later request, whose reply moves the clock again. Counting from
            # the (possibly long) handshake's start, or from the old session's
            # silence, would only declare a fresh, healthy session LOST.
            self.last_heard = session_clock()

    def _heard(self, sent_at: float) -> None:
        if sent_at > self.last_heard:
            self.last_heard = sent_at

    def _kazoo_listener(self, state: Any) -> None:
        # Runs on kazoo's connection thread: record, hand off, never block.
        if self.stopping:
            return
        keeper = self._kz.client_state
        if state == KazooState.CONNECTED:
            # Called from inside kazoo's _connect, before anyone hears of the
            # session: move the clock first, or the watchdog would judge the
            # new connection by the silence of the old one.
            self._connected_now()
            kind = "READ_ONLY" if keeper == KeeperState.CONNECTED_RO else "CONNECTED"
        elif state == KazooState.SUSPENDED:
            kind = "SUSPENDED"
        elif keeper == KeeperState.EXPIRED_SESSION:
            kind = "EXPIRED"
        elif keeper == KeeperState.AUTH_FAILED:
            kind = "AUTH_FAILED"
        else:
            kind = "CLOSED"
        try:
            self._on_state(self, kind, self.session_id)
        except Exception:
            log.exception("error in the zk_recipes state hook")

    # -- lifecycle -------------------------------------------------------
    def start(self, timeout: float, *, refused_ends: bool = False) -> None:
        """Connect within ``timeout`` seconds, or raise ConnectTimeoutError by then.

        ``refused_ends``: give up as soon as a whole round of the servers refused
        the connection (``refused_everywhere``), for callers that must answer at
        once rather than wait for an ensemble to come up.

        Not kazoo's ``start(timeout)``, for two reasons. It waits out its whole
        timeout even when the client is being closed (an unreachable ensemble
        kept ``close()`` and process exit waiting 15 s), so the wait is done
        here, in steps, and ``abort_start()`` from another thread ends it. And it
        stops a connection that did not come up in time before it raises, where
        kazoo's stop waits for its connection thread, which may sit in the
        handshake read for the whole session timeout (a server that accepts and
        says nothing: paused, or behind a partition). So that stop runs on a
        thread of its own; our state hook ignores this connection from that
        moment (``stopping``).
        """
        check_hosts_resolve(self._kz.hosts, timeout)
        try:
            came_up = self._kz.start_async()
        except kz_exc.KazooException as exc:
            self.stop()
            raise translate(exc) from exc
        deadline = session_clock() + timeout
        while not came_up.wait(min(_START_STEP, max(0.0, deadline - session_clock()))):
            if self._aborted.is_set():
                self._stop_soon()
                raise errors.ClientStateError("the client was closed while it was starting")
            if session_clock() >= deadline:
                break
            if refused_ends and self.refused_everywhere and not self._kz.connected:
                self._stop_soon()
                seen = self._last_problem.message
                raise errors.ConnectTimeoutError(
                    f"every server of {self._settings.hosts} refused the connection"
                    + (f" (last problem: {seen})" if seen else "")
                    + ": nothing listens there. Check that ZooKeeper is running and that the "
                    "hosts setting names its client port."
                )
        if not self._kz.connected:
            seen = self._last_problem.message  # before stop() logs its own farewell
            self._stop_soon()
            hosts = self._settings.hosts
            raise errors.ConnectTimeoutError(
                f"could not connect to ZooKeeper at {hosts} within {timeout:g} s"
                + (f" (last problem: {seen})" if seen else "")
                + ". Check that the servers are running and reachable from here (e.g. `echo "
                "ruok | nc HOST PORT` answers imok), that the hosts setting is right, and "
                "that TLS/auth settings match the servers."
            )
        if self._settings.sasl:
            self._check_sasl(timeout)

    def _stop_soon(self) -> None:
        """``stop()`` on a daemon thread: the caller does not wait for kazoo's thread to end."""
        self.stopping = True
        try:
            run_in_thread("zk-recipes stop", self.stop)
        except RuntimeError:  # no thread to be had: stop here, late rather than never
            self.stop()

    def _check_sasl(self, timeout: float) -> None:
        """kazoo reports CONNECTED before its SASL handshake ends; a rejected one
        then surfaces as an expired session at the first request. One round trip
        at start turns that into the configuration error it is."""
        try:
            self._kz.exists_async("/").get(timeout=timeout)
        except (kz_exc.SessionExpiredError, kz_exc.AuthFailedError, kz_exc.ConnectionLoss) as exc:
            self.stop()
            mechanism = self._settings.sasl.get("mechanism") if self._settings.sasl else None
            raise errors.ConfigurationError(
                f"ZooKeeper did not accept the client's SASL {mechanism} credentials "
                f"(the session ended during authentication: {type(exc).__name__}). Check "
                "the sasl= username/password (or principal) against the server's JAAS "
                "configuration."
            ) from exc
        except KazooTimeoutError as exc:
            self.stop()
            raise errors.ConnectTimeoutError(
                f"SASL authentication with ZooKeeper did not finish within {timeout:g} s"
            ) from exc

    def abort_start(self) -> None:
        """Make a ``start()`` under way on another thread stop now (ClientStateError there)."""
        self._aborted.set()

    def stop(self) -> None:
        """Close the session (the server deletes its ephemeral nodes at once) and free resources."""
        self.stopping = True
        if self._kz is None:
            return
        # kazoo wakes its connection thread with one byte per queued request, and
        # only reads them back as it sends; after a long outage with requests made
        # meanwhile the wake socket is full, and stop()'s own wake-up byte would block
        # forever. A full socket already wakes the thread: never wait to add a byte.
        with contextlib.suppress(OSError, AttributeError):
            self._kz._connection._write_sock.setblocking(False)
        try:
            self._kz.stop()
        except Exception:
            log.warning("kazoo did not stop cleanly", exc_info=True)
        try:
            self._kz.close()
        except Exception:
            log.debug("kazoo close failed", exc_info=True)

    def discard(self) -> None:
        """Forget the client without touching its socket (used in a forked child)."""
        self.stopping = True
        self._kz = None

    @property
    def session_id(self) -> int:
        sid = self._kz._session_id if self._kz is not None else None
        return int(sid or 0)

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        if self._kz is None or not self._kz._session_id:
            return None
        return int(self._kz._session_id), bytes(self._kz._session_passwd)

    @property
    def connected(self) -> bool:
        return self._kz is not None and bool(self._kz.connected)

    @property
    def connected_address(self) -> tuple[str, int] | None:
        sock = getattr(self._kz._connection, "_socket", None) if self._kz is not None else None
        if sock is None:
            return None
        try:
            peer = sock.getpeername()
        except OSError:
            return None
        return str(peer[0]), int(peer[1])

    @property
    def kazoo_client(self) -> Any:
        return self._kz

    def abandon_session(self) -> None:
        """Make the next connect build a new session, and fail requests queued for the old one."""
        kz = self._kz
        if kz is None:
            return
        if kz.connected:
            self.expire_now()
            return
        kz._session_id = None
        kz._session_passwd = b"\x00" * 16
        kz._notify_pending(KeeperState.EXPIRED_SESSION)

    def expire_now(self) -> None:
        """Make kazoo drop the current session as expired, ahead of any queued request."""
        kz = self._kz
        if kz is None:
            return
        kz._queue.appendleft((_SESSION_EXPIRED, None))
        with contextlib.suppress(OSError, AttributeError):
            kz._connection._write_sock.send(b"\0")

    # -- requests (absolute paths) ---------------------------------------
    def create_async(
        self,
        path: str,
        data: bytes,
        mode: CreateMode,
        acl: Sequence[Acl] | None = None,
        ttl: float | None = None,
    ) -> Pending[tuple[str, ZnodeStat]]:
        kacl = _kazoo_acl(acl) if acl is not None else self._acl
        request: Any
        if mode is CreateMode.CONTAINER:
            request = _CreateContainer(path, data, kacl, mode.value)
        elif mode.is_ttl:
            if ttl is None:
                raise errors.ConfigurationError(f"{mode.name} needs ttl= (seconds)")
            request = _CreateTTL(path, data, kacl, mode.value, int(ttl * 1000))
        else:
            request = Create2(path, data, kacl, mode.value)
        return self._call(request, path, lambda r: (str(r[0]), _stat(r[1])))

    def check_and_create_async(
        self, check_path: str, path: str, data: bytes, mode: CreateMode
    ) -> Pending[None]:
        """Create ``path`` only if ``check_path`` exists, atomically (a multi: check + create).

        Fails with the NoNodeError of the check when ``check_path`` is gone, and
        then nothing is created.
        """
        if mode.is_ttl or mode is CreateMode.CONTAINER:
            raise errors.ConfigurationError(f"check_and_create does not take {mode.name} nodes")
        request = Transaction(
            [CheckVersion(check_path, -1), Create(path, data, self._acl, mode.value)]
        )

        def convert(results: Any) -> None:
            for result, failed_path in zip(results, (check_path, path), strict=False):
                if isinstance(result, kz_exc.RolledBackError):
                    continue
                if isinstance(result, BaseException):
                    raise translate(result, failed_path)

        return self._call(request, path, convert)

    def get_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[tuple[bytes, ZnodeStat]]:
        raw = self._send(GetData(path, self._watcher(watch)), path)
        return Pending(raw, path, lambda r: (bytes(r[0] or b""), _stat(r[1])), self)

    def get_children_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[list[str]]:
        raw = self._send(GetChildren(path, self._watcher(watch)), path)
        return Pending(raw, path, lambda r: [str(c) for c in r], self)

    def exists_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[ZnodeStat | None]:
        raw = self._send(Exists(path, self._watcher(watch)), path)
        return Pending(raw, path, lambda r: _stat(r) if r is not None else None, self)

    def set_async(self, path: str, data: bytes, version: int = -1) -> Pending[ZnodeStat]:
        raw = self._send(SetData(path, data, version), path)
        return Pending(raw, path, _stat, self)

    def delete_async(self, path: str, version: int = -1) -> Pending[None]:
        raw = self._send(Delete(path, version), path)
        return Pending(raw, path, lambda r: None, self)

    def sync_async(self, path: str) -> Pending[None]:
        raw = self._send(Sync(path), path)
        return Pending(raw, path, lambda r: None, self)

    def _admit(self, path: str) -> None:
        """Refuse a request while disconnected once many already wait to be sent.

        kazoo queues requests made while it is not connected and wakes its
        connection thread with one byte per request on a socket pair, read back
        only as each is sent. A long outage with requests made meanwhile (a
        status poll every second, say) fills that socket after a few hundred,
        and from then on every caller, ``close()`` included, blocks forever in
        kazoo's ``send``. Past ``_MAX_QUEUED_DISCONNECTED`` a request fails at
        once with ConnectionLostError instead: retryable, and nothing is queued.
        """
        kz = self._kz
        if len(kz._queue) >= _MAX_QUEUED_DISCONNECTED and not kz.connected:
            raise errors.ConnectionLostError(
                f"{path}: not connected to ZooKeeper, and {len(kz._queue)} requests already "
                "wait to be sent; try again once connected"
            )

    def _call(self, request: Any, path: str, convert: Callable[[Any], T]) -> Pending[T]:
        return Pending(self._send(request, path), path, convert, self)

    def _send(self, request: Any, path: str) -> Any:
        """Send ``request``: written by this thread when it may, else through kazoo's queue.

        Every request of ours passes here, so this is where its size is checked:
        the server drops the connection of a request over its jute.maxbuffer
        (docs/settings.md, max_data_bytes), and kazoo would send it again on
        every reconnect. The body serialized for the check is the one a direct
        send writes; kazoo's queue serializes it again.
        """
        body = request.serialize()
        if len(body) + _HEADER_BYTES > self._max_request:
            raise _paths.request_too_large(
                _REQUEST_NAMES.get(request.type, "ZooKeeper"),
                path if self._event_path is None else self._event_path(path),
                len(body) + _HEADER_BYTES,
                self._max_request,
            )
        raw = self._kz.handler.async_result()
        if self._direct.send(request, raw, body):
            return raw
        self._admit(path)
        if self._kz._call(request, raw) is False:
            raise translate(raw.exception, path, stopped=self.stopping)
        return raw

    def _watcher(self, watch: WatchCallback | None) -> Callable[[Any], None] | None:
        if watch is None:
            return None

        event_path = self._event_path

        def _fire(event: Any) -> None:
            path = event.path
            if event_path is not None:
                path = event_path(path) if path else None
            watch(WatchEvent(_EVENT_TYPES.get(event.type, WatchEventType.NONE), path))

        if is_inline(watch):
            mark_inline(_fire)
        return _fire

    def close_session_on_server(self, client_id: tuple[int, bytes], timeout: float) -> None:
        """Close a session we gave up on, so its ephemeral nodes go now rather than at expiry."""
        kwargs = dict(self._kz_kwargs)
        kwargs.update(client_id=client_id, connection_retry=None)
        other: Any = KazooClient(**kwargs)
        try:
            other.start(timeout=timeout)
            if other._session_id == client_id[0]:
                other.stop()
        except Exception:
            log.debug("closing abandoned session %#x failed (it may have expired)", client_id[0])
        finally:
            try:
                other.stop()
                other.close()
            except Exception:
                pass
