"""KazooConnection: one KazooClient, its lifecycle and its bookkeeping (paths are absolute).

The lifecycle kazoo's own ``start``/``stop`` do not give (a start that keeps
its timeout and can be aborted, a stop that does not wait on a silent
server, a session abandoned for simulated expiry), the proof that the quorum
heard us (``last_heard``, ``prove()``: the package note), and what each
connection that came up saw (``generation``, ``resumed_since``). The typed
requests it inherits are requests.py's, the watch operations watch_ops.py's.

Size: over the house limit (tests/test_module_sizes.py): the start, stop and session
abandonment share the kazoo client's private state with the bookkeeping its
hooks keep (hooks.py) and the proof of the quorum; the requests, the watch
operations, the wire records, the failures and kazoo's logger are apart.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import kazoo.exceptions as kz_exc
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionDropped
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.connection import _SESSION_EXPIRED
from kazoo.protocol.serialization import (
    Sync,
)
from kazoo.protocol.states import KazooState, KeeperState
from kazoo.retry import KazooRetry

from zk_recipes import _errors as errors, _paths
from zk_recipes._client.direct_send import DirectSender
from zk_recipes._client.kazoo.attempts import RecordingLogger
from zk_recipes._client.kazoo.bound import refused
from zk_recipes._client.kazoo.failures import not_connected, translate
from zk_recipes._client.kazoo.hooks import install_hooks
from zk_recipes._client.kazoo.pending import new_result
from zk_recipes._client.kazoo.records import (
    THROUGH_THE_LEADER,
    kazoo_acl,
)
from zk_recipes._client.kazoo.watch_ops import WatchOps
from zk_recipes._client.kazoo.watches import (
    PersistentRouter,
)
from zk_recipes._client.poll_select import poll_select
from zk_recipes._client.resolve import check_hosts_resolve
from zk_recipes._deadline import session_clock
from zk_recipes._settings import ClientSettings
from zk_recipes._threads import run_in_thread
from zk_recipes._types import (
    OPEN_ACL_UNSAFE,
)

log = logging.getLogger("zk_recipes.client")

T = TypeVar("T")

#: How often a start looks whether ``abort_start()`` was called.
_START_STEP = 0.1


#: kazoo's raw state hook: (connection, kind, session_id) with kind one of
#: CONNECTED, READ_ONLY, SUSPENDED, EXPIRED, CLOSED, AUTH_FAILED. CLOSED here
#: always means kazoo's connection thread ended on its own (auth failure, an
#: unexpected error): after ``stop()`` the hook is not called any more.
RawStateHook = Callable[["KazooConnection", str, int], None]


class KazooConnection(WatchOps):
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
        self._last_problem = RecordingLogger(logging.getLogger("kazoo.client"))
        self._kz: Any = KazooClient(**self._kz_kwargs, logger=self._last_problem)
        # One poll(2) per wait instead of an epoll object per call (poll_select's docstring).
        self._kz.handler.select = poll_select
        self._acl = kazoo_acl(settings.default_acl or OPEN_ACL_UNSAFE)
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
        self._zxid_before = 0
        #: Connections that came up, counted from 1 (``generation``), and for the
        #: newest ones: (generation, session id, the zxid seen before it).
        self.generation = 0
        self._generations: collections.deque[tuple[int, int, int]] = collections.deque(maxlen=16)
        # Callers write their own requests while nothing is queued (direct_send's
        # docstring); TLS, SASL, auth schemes and read-only mode keep kazoo's path.
        self._direct = DirectSender(
            pending=lambda: self._kz._pending,
            queue=lambda: self._kz._queue,
            next_xid=self._next_xid,
            on_sent=self._on_direct_send,
            refuse=refused,
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
        #: The persistent watchers of this connection (watches.py); the client's
        #: registry puts them here, and back on the server after every reconnect.
        self._router = PersistentRouter()
        install_hooks(self)

    def set_hosts(self, hosts: str, randomize: bool = True) -> None:
        """Connect to ``hosts`` from the next connection attempt on (the session is kept);
        ``randomize=False``: tried in the order given."""
        self._kz_kwargs["hosts"] = hosts
        self._kz_kwargs["randomize_hosts"] = randomize
        self._kz.set_hosts(hosts, randomize_hosts=randomize)

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
        if kind in THROUGH_THE_LEADER:
            self._sent[xid] = at

    def prove(self) -> None:
        """Send a sync (through kazoo's queue), unless one is in flight: its reply proves
        the quorum heard us (the module note). Never blocks the caller."""
        if self._proving is not None:
            return
        raw = new_result(self._kz)
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
        self.generation += 1
        self._generations.append((self.generation, self._kz._session_id or 0, self._zxid_before))
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

    @property
    def last_zxid(self) -> int:
        """The zxid in the header of the newest reply read on this client (kazoo's ``last_zxid``).

        Read on the connection's thread (an inline watch callback) it orders a
        notification among the replies: a server sends the replies to the
        requests it handled before a change ahead of the change's notification,
        each carrying the zxid it had applied then, so every reply read before
        the notification carries a zxid older than the change's.
        """
        kz = self._kz
        return int(kz.last_zxid or 0) if kz is not None else 0

    def resumed_since(self, generation: int) -> int | None:
        """The zxid seen when connection ``generation`` ended, if its session is still ours.

        None when that session ended since (expired: a new one has nothing of
        it) or the record is too old.
        """
        records = {gen: (session, zxid) for gen, session, zxid in self._generations}
        then, after = records.get(generation), records.get(generation + 1)
        if then is None or after is None or not then[0]:
            return None
        if then[0] != self._generations[-1][1] or after[1] <= 0:
            return None
        return after[1]

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
            raise errors.ConnectTimeoutError(not_connected(self._settings.hosts, timeout, seen))
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

    def close_session_on_server(self, client_id: tuple[int, bytes], timeout: float) -> None:
        """Close a session we gave up on, so its ephemeral nodes go now rather than at expiry.

        Given up as soon as this connection is stopped (the client closed): the
        helper never outlives the client by its whole timeout, and its kazoo
        client's per-attempt lines are ours, at DEBUG (``RecordingLogger``).
        """
        kwargs = dict(self._kz_kwargs)
        kwargs.update(client_id=client_id, connection_retry=None)
        other: Any = KazooClient(
            **kwargs, logger=RecordingLogger(logging.getLogger("kazoo.client"))
        )
        try:
            came_up = other.start_async()
            deadline = session_clock() + timeout
            while not came_up.wait(_START_STEP):
                if self.stopping or session_clock() >= deadline:
                    break
            if other.connected and other._session_id == client_id[0]:
                other.stop()
        except Exception:
            log.debug("closing abandoned session %#x failed (it may have expired)", client_id[0])
        finally:
            try:
                other.stop()
                other.close()
            except Exception:
                pass
