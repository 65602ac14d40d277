"""ZkClient: one managed ZooKeeper session, with Curator's state model.

Design notes.

- **States, simulated expiry and the loss epoch** live in _client/session.py
  (SessionTracker): Curator's five states plus CLOSED, LOST declared locally
  when the server cannot have heard us for too long, abandoned sessions
  closed on the server, and the epoch every hold is checked against.
- **Listeners** run on threads of their own, never kazoo's (_client/states.py).
- **Creates** (protected names, container parents, create+list pipelining)
  are _client/creates.py's; guaranteed deletes _client/deletes.py's.
- **Namespace.** Paths are relative to ``namespace`` (a chroot-like prefix
  created lazily as a CONTAINER). kazoo's own chroot is not used: it cannot
  create its root and warns when the root is missing.
- **close()** ends every hold before the server can hand it to anyone else:
  pending guaranteed deletes get their chance first (while the session is
  still ours), then the tracker ends the session life (the epoch moves and
  listeners hear CLOSED), and only then is the session closed on the server,
  which deletes our ephemeral nodes.
- **A connection that ends by itself** (kazoo's thread stops on AUTH_FAILED
  or an unexpected error) is rebuilt in the background with back-off; the
  session it carried is LOST, requests meanwhile fail with the retryable
  ConnectionLostError.
- **Fork.** A kazoo client does not survive fork() (its threads are gone and
  its socket is shared with the parent). A client used in a forked child
  raises ClientStateError; ``close()`` in the child only forgets the client,
  never touching the parent's session nor any lock copied from the parent.
  Create clients after forking (the framework integrations do).

Size: over the house limit (tests/test_module_sizes.py): ZkClient is the one object users
hold, and its node operations (create, get, set, delete, their async forms)
are thin — validate, make the path absolute, hand over to the adapter — so
the class is kept in one file to read in one place; everything with logic
of its own lives in its collaborators (session.py, creates.py, deletes.py,
persistent.py).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, final

from zk_recipes import _metrics, _paths
from zk_recipes._client.creates import CreateResult, Creator
from zk_recipes._client.deletes import GuaranteedDeleter
from zk_recipes._client.holder import holder_check
from zk_recipes._client.kazoo import KazooConnection, Pending, not_connected
from zk_recipes._client.kazoo.bound import Still
from zk_recipes._client.persistent import Established, PersistentWatch, PersistentWatches
from zk_recipes._client.session import SessionTracker
from zk_recipes._client.states import ConnectionState, ListenerRegistry, StateListener
from zk_recipes._client.transaction import Transaction
from zk_recipes._deadline import session_clock
from zk_recipes._errors import (
    ClientStateError,
    ConfigurationError,
    ConnectionLostError,
    ConnectTimeoutError,
    HolderSessionLost,
    NoNodeError,
    RecipeUsageError,
    SessionLost,
    TransactionFailedError,
    TransactionOutcomeUnknown,
    WrongTypeError,
    ZkTimeoutError,
)
from zk_recipes._logfields import fields
from zk_recipes._retry import retry
from zk_recipes._settings import ClientSettings
from zk_recipes._threads import say, start_or_defer
from zk_recipes._types import Acl, CreateMode, WatchCallback, ZnodeStat

log = logging.getLogger("zk_recipes.client")

T = TypeVar("T")

#: Back-off between attempts to rebuild a connection whose thread ended by itself.
_REVIVE_FIRST, _REVIVE_MAX = 0.1, 5.0

_live_clients: weakref.WeakSet[ZkClient] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_live_clients):
        client._forked = True


def _close_at_exit() -> None:
    for client in list(_live_clients):
        try:
            client.close()
        except Exception:  # pragma: no cover - best effort at exit
            log.debug("closing a client at exit failed", exc_info=True)


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_at_exit)


@final
class ZkClient:
    """A managed ZooKeeper client: ``ZkClient("zk1:2181,zk2:2181", namespace="myapp")``.

    Use as a context manager, or call ``start()`` and ``close()``. Options are
    the fields of `ClientSettings` (``namespace``, ``session_timeout``,
    ``connection_timeout``, ``retry_policy``, ``auth``, ``sasl``,
    ``default_acl``, ``tls``, ``read_only``, ``simulated_expiry_fraction``,
    ``max_data_bytes``; see docs/settings.md); pass ``settings=`` to reuse
    one. Every recipe takes a client; the client knows no recipe.
    """

    def __init__(
        self, hosts: str | None = None, *, settings: ClientSettings | None = None, **options: Any
    ) -> None:
        if settings is not None:
            if not isinstance(settings, ClientSettings):
                raise WrongTypeError(f"settings must be a ClientSettings, got {settings!r}")
            if hosts is not None or options:
                settings = settings.replace(**({"hosts": hosts} if hosts else {}), **options)
        elif hosts is None:
            raise ConfigurationError(
                "ZkClient needs hosts, e.g. ZkClient('zk1:2181,zk2:2181,zk3:2181') "
                "(or settings=ClientSettings(hosts=...))"
            )
        else:
            settings = ClientSettings(hosts=hosts, **options)
        self.settings = settings
        self._lock = threading.Lock()
        self._listeners = ListenerRegistry()
        self._tracker = SessionTracker(settings, self._listeners, self._connection_ended)
        self._conn: KazooConnection | None = None
        self._started = False
        self._closed = False
        self._closed_event = threading.Event()
        self._forked = False
        self._reviving = False
        self._deleter = GuaranteedDeleter(self, self._delete_backoff)
        self._creator = Creator(self, self._deleter, settings.session_timeout)
        self._persistent = PersistentWatches(self)
        self._wakeups: set[threading.Event] = set()
        self._starting: threading.Event | None = None
        _metrics.observe_client(self)

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float | None = None, *, refused_ends: bool = False) -> ZkClient:
        """Connect and establish a session; raise ConnectTimeoutError if not done in ``timeout`` s.

        ``refused_ends=True`` gives up sooner, as soon as every server has
        refused the connection once (a stopped ensemble, a wrong port: nothing
        listens), for callers that must answer at once, like a command run with
        ``--no-wait``. A server that accepts and says nothing is still waited
        for up to ``timeout``. Idempotent: starting a started client does nothing.
        """
        if timeout is None:
            timeout = self.settings.connection_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise WrongTypeError(
                f"start(timeout=) must be a positive number of seconds, got {timeout!r}"
            )
        if not timeout > 0:
            raise ConfigurationError(
                f"start(timeout=) must be a positive number of seconds, got {timeout!r}"
            )
        self._check_fork()
        deadline = time.monotonic() + timeout
        waited = False  # on another thread's start that failed: ours gets the time left
        while True:
            with self._lock:
                if self._closed:
                    raise ClientStateError("this ZkClient was closed; create a new one")
                concurrent = self._starting
                if concurrent is None:
                    if self._started:
                        return self
                    conn = self._new_connection()
                    self._started = True
                    starting = self._starting = threading.Event()
                    break
            # Another thread is starting this client: return once it is connected,
            # never before (a request sent while kazoo is CONNECTING fails); if that
            # start fails, try again ourselves in the time left.
            waited = True
            if not concurrent.wait(max(0.0, deadline - time.monotonic())):
                raise ConnectTimeoutError(self._not_connected_in(timeout))
            if deadline - time.monotonic() <= 0 and not self.is_started:
                raise ConnectTimeoutError(self._not_connected_in(timeout))
        try:
            conn.start(
                max(0.001, deadline - time.monotonic()) if waited else timeout,
                refused_ends=refused_ends,
            )
        except BaseException:
            with self._lock:
                self._started = False
                self._conn = None
            raise
        finally:
            with self._lock:
                self._starting = None
            starting.set()  # a close() waiting for this start stops ``conn`` now
        if self.is_closed:
            raise ClientStateError("this ZkClient was closed while it was starting")
        _live_clients.add(self)
        return self

    def _not_connected_in(self, timeout: float) -> str:
        """Why a start that waited on another thread's start gave up: the cause and a hint."""
        return not_connected(self.settings.hosts, timeout, self.connection_problem)

    def close(self) -> None:
        """Close the session: every hold ends, the server deletes our ephemeral nodes. Idempotent.

        Recipes hear CLOSED (a lock's ``lost`` is set, ``is_held()`` turns
        False, ``check()`` raises) before the server lets anyone else take
        what this client held.
        """
        if self._forked:
            # The session is the parent's; locks copied from the parent may be held
            # forever here (a parent thread held them at fork): touch none of them.
            self._closed = True
            conn, self._conn = self._conn, None
            _live_clients.discard(self)
            if conn is not None:
                conn.discard()
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            wakeups, self._wakeups = self._wakeups, set()
            starting = self._starting
        self._closed_event.set()
        if starting is not None:
            # A start under way is told to stop (it may be waiting out an unreachable
            # ensemble), then waited for: a session it made would live on otherwise.
            conn = self._conn
            if conn is not None:
                conn.abort_start()
            starting.wait(self.settings.connection_timeout)
        if self._conn is not None and self._deleter.pending():
            # Queued guaranteed deletes (persistent nodes among them) get their
            # chance while the session is still ours: the deleter sends them as
            # soon as the connection is up, within a second at most.
            self._deleter.wait_empty(min(1.0, self.settings.connection_timeout))
        left = self._deleter.pending()
        if left:
            # An ephemeral node goes with the session; a persistent one stays until
            # someone deletes it: say which, so that someone can.
            log.warning(
                "closing the client with %d delete(s) not done (not connected): %s. Ephemeral "
                "nodes go with the session; delete any persistent one left by hand",
                len(left),
                ", ".join(self._rel(path) for path in left),
                extra=fields("delete.dropped", path=self._rel(left[0])),
            )
        self._deleter.stop()
        # Every hold ends here (epoch, CLOSED), before the server can hand it on.
        self._tracker.close()
        for event in wakeups:
            event.set()
        with self._lock:
            conn, self._conn = self._conn, None
        _live_clients.discard(self)
        if conn is not None:
            conn.stop()
        self._listeners.wait_idle(1.0)

    def _metric_snapshot(self) -> tuple[str | None, int]:
        """For the scrape-time gauges: (state name, None once closed; deletes pending)."""
        state = self._tracker.state
        if self._closed or state is None or state is ConnectionState.CLOSED:
            return None, 0
        return state.name, self._deleter.pending_count()

    def __enter__(self) -> ZkClient:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        current = self._tracker.state
        state = "closed" if self._closed else (current.name if current else "not started")
        return (
            f"<ZkClient {self.settings.hosts}{self.settings.namespace} {state}"
            f" session={self.session_id:#x}>"
        )

    # ------------------------------------------------------------------ a connection that ended
    def _connection_ended(self, dead: KazooConnection, why: str) -> None:
        # The tracker's hook, on the dying connection's thread: hand off at once.
        with self._lock:
            if self._closed or self._conn is not dead or self._reviving:
                return
            self._reviving = True
        # A reconnect that cannot start now (thread exhaustion) is started later by
        # the session watchdog (retry_deferred); _reviving stays set until it ends.
        start_or_defer("zk-recipes reconnect", lambda: self._revive(dead))
        say(
            functools.partial(
                log.warning,
                "the connection to ZooKeeper ended for good (%s); its session is LOST, "
                "building a new connection",
                why,
            )
        )

    def _revive(self, dead: KazooConnection) -> None:
        dead.stop()
        delay = _REVIVE_FIRST
        failures = 0
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return
                    conn = self._new_connection()
                try:
                    conn.start(self.settings.connection_timeout)
                except Exception as exc:  # keep trying whatever it was: never a zombie
                    failures += 1
                    (log.warning if failures == 1 else log.debug)(
                        "rebuilding the connection to ZooKeeper failed (%s); next try in %.1f s",
                        exc,
                        delay,
                    )
                    if self._closed_event.wait(delay):
                        return
                    delay = min(_REVIVE_MAX, delay * 2)
                    continue
                log.info("connection to ZooKeeper rebuilt (session %#x)", conn.session_id)
                return
        finally:
            with self._lock:
                self._reviving = False

    # ------------------------------------------------------------------ introspection
    @property
    def state(self) -> ConnectionState | None:
        """The last state told to listeners (None before the first connection)."""
        return self._tracker.state

    @property
    def session_id(self) -> int:
        """The id of the last session that connected (0 before the first one).

        It keeps a lost session's id until a new session connects: to ask
        whether a node is still ours, use ``session_epoch()``.
        """
        return self._tracker.session_id

    @property
    def loss_epoch(self) -> int:
        """How many session lives this client has ended (LOST, or close()).

        A hold taken in epoch *e* (``session_epoch(owner)``) is still ours
        exactly while ``loss_epoch == e``: for recipe authors.
        """
        return self._tracker.epoch

    def session_epoch(self, session_id: int) -> int | None:
        """The loss epoch of ``session_id`` if it is this client's live session, else None."""
        return self._tracker.epoch_of(session_id)

    @property
    def state_seq(self) -> int:
        """The ``seq`` of the last StateChange published (0 before the first)."""
        return self._tracker.seq

    @property
    def state_changed_at(self) -> float:
        """``time.monotonic()`` when the last state change was decided (its StateChange.at)."""
        return self._tracker.changed_at

    def state_snapshot(self) -> tuple[int, ConnectionState | None]:
        """``(state_seq, state)`` read together: the state as of that change, for recipe authors.

        Reading ``state`` and ``state_seq`` one after the other can pair a
        state with the seq of a change published in between.
        """
        return self._tracker.snapshot()

    def earlier_sessions(self) -> set[int]:
        """Sessions this client had before the current one (their nodes are ours, and stale)."""
        return self._tracker.earlier_sessions()

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) of the current session, as kazoo's ``client_id``."""
        conn = self._conn
        return conn.client_id if conn is not None else None

    @property
    def connect_string(self) -> str:
        return self.settings.hosts

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    @property
    def negotiated_session_timeout(self) -> float | None:
        """The session timeout the server granted, in seconds."""
        conn = self._conn
        return conn.negotiated_timeout if conn is not None else None

    @property
    def connected_address(self) -> tuple[str, int] | None:
        """(host, port) of the server this client is connected to, if any."""
        conn = self._conn
        return conn.connected_address if conn is not None else None

    @property
    def connection_problem(self) -> str | None:
        """Why this client is not connected, in words; None while it is (or before any attempt).

        The newest failure of its connection since it was last connected
        ("Connection dropped: socket connection error: Connection refused",
        "Cannot resolve zk1: ..."): what health checks report as ``last_error``
        and what ``UnavailableError`` and ``ConnectTimeoutError`` carry.
        """
        conn = self._conn
        state = self._tracker.state
        if conn is None or (state is not None and state.is_connected):
            return None
        return conn.last_problem or None

    @property
    def unanswered_for(self) -> float:
        """Seconds the oldest write (or sync) on the connection has waited for its reply; 0 if none.

        A server that keeps the connection open and answers nothing (paused, or
        cut off behind a one-way partition) shows here long before the client
        hears a missed ping and says SUSPENDED: a face that must answer at once
        looks at it before queueing another request behind the silent ones.
        """
        conn = self._conn
        sent = conn.oldest_unanswered() if conn is not None else None
        return 0.0 if sent is None else max(0.0, session_clock() - sent)

    @property
    def _refused_everywhere(self) -> bool:
        """Every server refused the connection in the latest round (nothing listens)."""
        conn = self._conn
        return conn is not None and conn.refused_everywhere

    @property
    def kazoo_client(self) -> Any:
        """The underlying kazoo client (an escape hatch; its state is managed here)."""
        return self._usable().kazoo_client

    @property
    def is_started(self) -> bool:
        return self._started and not self._closed

    @property
    def is_closed(self) -> bool:
        """True once ``close()`` was called (a closed client cannot start again)."""
        return self._closed

    # ------------------------------------------------------------------ listeners
    def add_listener(self, listener: StateListener) -> None:
        """Call ``listener(StateChange)`` on each state change, on a thread of its own."""
        self._listeners.add(listener)

    def remove_listener(self, listener: StateListener) -> None:
        self._listeners.remove(listener)

    @contextlib.contextmanager
    def wake_on_close(self, event: threading.Event) -> Iterator[None]:
        """Set ``event`` if this client is closed while the block runs.

        For recipes that wait on a watch: kazoo stops its callback thread on
        close without firing pending watches, so without this a waiter would
        sleep until its own timeout (or forever).
        """
        with self._lock:
            if self._closed:
                event.set()
            else:
                self._wakeups.add(event)
        try:
            yield
        finally:
            with self._lock:
                self._wakeups.discard(event)

    def wait_connected(self, timeout: float | None) -> bool:
        """Block until connected (CONNECTED/RECONNECTED/READ_ONLY); False on timeout or close."""
        return self._tracker.wait_connected(timeout)

    # ------------------------------------------------------------------ guards
    def check_usable(self) -> None:
        """Raise ClientStateError unless requests can be sent (started, not closed, not forked).

        Recipes call it to fail fast, before queueing anything.
        """
        self._usable()

    def _check_fork(self) -> None:
        if self._forked:
            raise ClientStateError(
                "this ZkClient was started in a parent process and cannot be used after fork(): "
                "a ZooKeeper session cannot be shared between processes. Create the client in "
                "the child (after the fork), e.g. in Celery's worker_process_init; the "
                "zk_recipes framework integrations do this for you."
            )

    def _new_connection(self) -> KazooConnection:
        """A new connection, the current one from now on (call under ``_lock``).

        Its watches see paths relative to the namespace, as every caller does.
        """
        conn = self._conn = KazooConnection(
            self.settings, self._tracker.on_raw_state, event_path=self._rel
        )
        self._tracker.attach(conn)
        return conn

    def _usable(self) -> KazooConnection:
        self._check_fork()
        conn = self._conn
        if conn is None or self._closed:
            if self._closed:
                raise ClientStateError("this ZkClient is closed; create a new one")
            raise ClientStateError("this ZkClient is not started; call start() or use `with`")
        return conn

    def _live_conn(self) -> KazooConnection:
        """The connection even while close() lets pending deletes finish."""
        conn = self._conn
        if conn is None:
            raise ClientStateError("this ZkClient is closed; create a new one")
        return conn

    def _wait_usable(self, timeout: float) -> bool:
        return self.wait_connected(timeout)

    @property
    def _op_timeout(self) -> float:
        return self.settings.connection_timeout

    def _abs(self, path: str) -> str:
        ns = self.settings.namespace
        return ns + path if path != "/" else (ns or "/")

    def _rel(self, path: str) -> str:
        ns = self.settings.namespace
        if ns and path.startswith(ns):
            return path[len(ns) :] or "/"
        return path

    def _delete_backoff(self, attempt: int) -> float:
        return float(min(2.0, 0.05 * 2 ** min(attempt, 6)))

    # ------------------------------------------------------------------ retry
    def retry(self, fn: Callable[[], T], *, timeout: float | None = None) -> T:
        """Run ``fn`` under the client's retry policy (connection errors only)."""
        deadline = time.monotonic() + timeout if timeout is not None else None
        return retry(self.settings.retry_policy, fn, deadline=deadline)

    # ------------------------------------------------------------------ requests
    def _checked_data(self, data: object, path: str) -> bytes:
        return _paths.validate_data(data, path=path, limit=self.settings.max_data_bytes)

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        mode: CreateMode = CreateMode.PERSISTENT,
        acl: tuple[Acl, ...] | None = None,
        ttl: float | None = None,
        parents: bool = False,
        protected: bool = False,
        replace_stale: bool = False,
        retry: bool = True,
    ) -> CreateResult:
        """Create a node and return its path and stat.

        ``parents``: create missing ancestors as CONTAINER nodes (reaped by the
        server once empty). ``protected``: Curator's protected mode, so a create
        whose reply was lost is found again instead of leaving an orphan.
        ``replace_stale``: for a fixed-name EPHEMERAL node still held by one of
        this client's earlier sessions, delete it and create ours.
        ``retry=False``: one attempt, no retry on connection loss — for callers
        (compare-and-set counters) to whom a resent create that meets its own
        first copy as NodeExists would look like a lost race.
        """
        _paths.validate_writable_path(path)
        data = self._checked_data(data, path)
        mode = CreateMode.checked(mode)
        ttl = mode.check_ttl(ttl)
        if replace_stale and mode is not CreateMode.EPHEMERAL:
            raise ConfigurationError("replace_stale=True only applies to CreateMode.EPHEMERAL")
        self._usable()
        return self._creator.create(
            self._abs(path),
            data,
            mode,
            acl,
            ttl,
            parents=parents,
            protected=protected,
            replace_stale=replace_stale,
            retry=retry,
        )

    def ensure_path(self, path: str) -> None:
        """Make ``path`` and its missing ancestors exist, as CONTAINER nodes."""
        _paths.validate_writable_path(path)
        self._usable()
        self.retry(lambda: self._creator.ensure(self._abs(path)))

    def create_and_list(
        self,
        path: str,
        data: bytes = b"",
        *,
        mode: CreateMode = CreateMode.EPHEMERAL_SEQUENTIAL,
        acl: tuple[Acl, ...] | None = None,
        protected: bool = True,
        parents: bool = True,
        timeout: float | None = None,
    ) -> tuple[CreateResult, list[str] | None]:
        """Create a node and read its parent's children in the same round trip.

        The two requests are pipelined on one connection and the server answers
        them in order, so the list already holds the new node: this is the first
        step of every queue recipe (lock, semaphore, election) for the cost of
        one round trip. Protection and container parents as in ``create``.

        Once the node exists this never raises: the list is None when it could
        not be read, and the caller reads it again (a raise would leave our node
        behind with nobody to delete it). ``timeout`` bounds the wait for the
        create's reply (default: the connection timeout, then retries until
        connected): past it, ``OperationTimeoutError``, and a protected node
        the server may have made is deleted in the background.
        """
        _paths.validate_writable_path(path)
        data = self._checked_data(data, path)
        mode = CreateMode.checked(mode)
        self._usable()
        return self._creator.create_and_list(
            self._abs(path), data, mode, acl, protected=protected, parents=parents, timeout=timeout
        )

    def check_and_create(
        self, check_path: str, path: str, data: bytes = b"", *, mode: CreateMode
    ) -> ZnodeStat:
        """Create ``path`` only if ``check_path`` exists, atomically; return the new node's stat.

        NoNodeError (naming ``check_path``) when it does not exist: nothing was
        created. One transaction (``transaction()``: a check and a create).
        Not resent after a lost reply: the node is looked up instead.
        """
        _paths.validate_path(check_path)
        _paths.validate_writable_path(path)
        data = self._checked_data(data, path)
        mode = CreateMode.checked(mode)
        if mode.is_sequential:
            raise ConfigurationError("check_and_create takes a fixed name: not a SEQUENTIAL mode")
        if mode.is_ttl or mode is CreateMode.CONTAINER:
            raise ConfigurationError(f"check_and_create does not take {mode.name} nodes")
        self._usable()
        full = self._abs(path)
        try:
            created = self.transaction().check(check_path, -1).create(path, data, mode=mode)
            result = created.commit()[1]
        except TransactionFailedError as exc:
            raise exc.cause from exc  # NoNodeError of check_path, NodeExistsError of path, ...
        except TransactionOutcomeUnknown:
            stat = self.retry(lambda: self._exists_abs(full))
            ours = stat is not None and (
                not mode.is_ephemeral or self.session_epoch(stat.ephemeral_owner) is not None
            )
            if not ours:
                raise
            assert stat is not None
            return stat
        assert isinstance(result, CreateResult)
        return result.stat

    def transaction(self, *, session: int | None = None) -> Transaction:
        """A multi-transaction: operations applied all or none (``commit()`` or a ``with``).

        ``check``, ``create`` (any mode; ``protected``), ``set`` and
        ``delete``, each returning the transaction; the results per operation
        after the commit. ``session``: commit as the holder of a node that
        session made: sent only while it is this client's live session,
        ``HolderSessionLost`` (nothing sent, nothing applied) otherwise. See
        ``zk_recipes._client.transaction`` and docs/client.md.
        """
        self._usable()
        return Transaction(self, session=session)

    def add_watch(
        self,
        path: str,
        callback: WatchCallback,
        *,
        recursive: bool = True,
        on_established: Established | None = None,
    ) -> PersistentWatch:
        """A persistent watch on ``path``: every change, until ``remove()``, across reconnects.

        ``recursive=True`` (the default): CREATED, CHANGED and DELETED of
        ``path`` and of every node below it, at any depth (never CHILD).
        ``recursive=False``: ``path`` alone, CHILD (its children changed)
        included. The path need not exist yet. ``callback(WatchEvent)`` runs
        on kazoo's watch thread in the server's order and must be quick.

        The server drops watches with each connection and puts nothing back
        for what changed meanwhile: the client sends the watch again on every
        connection that comes up, then calls ``on_established(watch)``; from
        then on nothing is missed, and what changed before may have been, so
        re-read what you rely on there. ``UnsupportedFeatureError`` when the
        server has no persistent watches (older than 3.6, or running
        ``WatchManagerOptimized``). A one-shot ``watch=`` on exactly this path
        is refused while the watch lives (``RecipeUsageError``): ZooKeeper
        3.6-3.8 keep one watch mode per path and would turn this one into a
        one-shot watch, silently. Persistent watches of both modes on one path
        are fine: they share one server watch in the strongest mode needed
        (``zk_recipes._client.kazoo.watches``).
        """
        _paths.validate_path(path)
        if not callable(callback):
            raise WrongTypeError(f"add_watch(callback=) must be callable, got {callback!r}")
        return self._persistent.add(
            path, self._abs(path), callback, bool(recursive), on_established
        )

    @property
    def connection_generation(self) -> int:
        """How many connections came up so far (each reconnect adds one); 0 before the first."""
        conn = self._conn
        return conn.generation if conn is not None else 0

    def resumed_since(self, generation: int) -> int | None:
        """The newest zxid seen when connection ``generation`` ended, if its session lives on.

        For a cache's incremental resync (``changed_since``): every change up
        to that zxid reached this client on that connection. None when the
        session ended since, or ``generation`` is not the connection before
        one still remembered (the last 16).
        """
        conn = self._conn
        return conn.resumed_since(generation) if conn is not None else None

    def changed_since(
        self,
        zxid: int,
        data_paths: list[str],
        child_paths: list[str],
        on_child: WatchCallback,
    ) -> tuple[int, list[str]]:
        """Ask the server which of these nodes changed after ``zxid`` (``setWatches2``).

        For recipe authors keeping a cache under a persistent recursive watch
        that was put back on this connection before the call: the server
        answers each path whose node changed after ``zxid`` with a catch-up
        event (CHANGED or DELETED for ``data_paths``, reaching the persistent
        watch; CHILD for ``child_paths``, given to ``on_child``), all handed
        to their callbacks before this returns (run by then if marked inline,
        else on kazoo's watch thread soon after), and keeps a one-shot watch
        on the others, which fires
        once at their next change. Paths with a persistent watch of this
        client are left out (a one-shot watch there would replace it on
        ZooKeeper 3.6-3.8) and returned: read them yourself. Returns
        (requests sent, paths left out).
        """
        conn = self._usable()
        watched = self._persistent.server_paths()
        data: list[str] = []
        child: list[str] = []
        left_out: list[str] = []
        for paths, into in ((data_paths, data), (child_paths, child)):
            for path in paths:
                full = self._abs(path)
                if full in watched:
                    if path not in left_out:
                        left_out.append(path)
                else:
                    into.append(full)
        sent = conn.catch_up(zxid, data, child, on_child, self.settings.connection_timeout)
        return sent, left_out

    def forget_changed_since(self, data_paths: list[str], child_paths: list[str]) -> int:
        """Take back the one-shot watches ``changed_since`` left on nodes that did not change.

        Sent without waiting, where no other watcher of this client is on the
        path (a removal takes the server's one watch of the path); returns the
        requests sent. The connection they were left on must still be up.
        """
        return self._persistent.forget_one_shot(
            [self._abs(p) for p in data_paths], [self._abs(p) for p in child_paths]
        )

    def remove_data_watch(self, path: str, watch: WatchCallback) -> None:
        """Take back the one-shot watch ``get``/``exists(path, watch=watch)`` set: it will not fire.

        For code that stopped waiting (a lock waiter that timed out or was
        cancelled): the server would keep the watch until the node changes.
        Sent without waiting for the reply. The server keeps one data watch
        per path and connection, so other data watches of this client on
        ``path`` get a NONE event, as after a reconnect, and read again.
        Nothing is sent while a persistent watch is on ``path``.
        """
        full = self._abs(path)
        # Not connected: the server dropped the watch with the connection.
        with contextlib.suppress(ClientStateError, ConnectionLostError):
            self._usable().forget_data_watch(full, watch)

    def _watched(self, path: str, watch: WatchCallback | None) -> str:
        """``path`` made absolute, refused for a one-shot watch where a persistent one is."""
        full = self._abs(path)
        if watch is not None and self._persistent.on_path(full):
            raise RecipeUsageError(
                f"a one-shot watch on {path}, which has a persistent watch on this client: "
                "ZooKeeper 3.6-3.8 keep one watch mode per path and would turn the "
                "persistent watch into a one-shot one. Read without watch= and take the "
                "events from the persistent watch, or watch from another client"
            )
        return full

    def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, ZnodeStat]:
        """The node's data and stat; ``watch`` fires once on change or delete."""
        _paths.validate_path(path)
        full = self._watched(path, watch)
        return self._usable().get_async(full, watch).result(self._op_timeout)

    def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        _paths.validate_path(path)
        return (
            self._usable()
            .get_children_async(self._watched(path, watch), watch)
            .result(self._op_timeout)
        )

    def exists(self, path: str, watch: WatchCallback | None = None) -> ZnodeStat | None:
        _paths.validate_path(path)
        return (
            self._usable().exists_async(self._watched(path, watch), watch).result(self._op_timeout)
        )

    def _exists_abs(self, path: str) -> ZnodeStat | None:
        return self._live_conn().exists_async(path).result(self._op_timeout)

    def set(
        self, path: str, data: bytes, version: int = -1, *, session: int | None = None
    ) -> ZnodeStat:
        """Set the node's data (at ``version``; -1: any).

        ``session``: write as the holder of a node that session made (its
        ``ephemeral_owner``): sent only while it is this client's live session,
        ``HolderSessionLost`` (nothing sent) otherwise (docs/client.md).
        """
        return self.set_async(path, data, version, session=session).result(self._op_timeout)

    def delete(
        self,
        path: str,
        version: int = -1,
        *,
        guaranteed: bool = False,
        recursive: bool = False,
        session: int | None = None,
        czxid: int | None = None,
    ) -> None:
        """Delete a node. A missing node is not an error.

        ``guaranteed``: if the connection fails, keep retrying in the background
        until the node is gone (or belongs to someone else). ``recursive``:
        delete the children first.

        ``session``: delete as the holder of a node that session made (its
        ``ephemeral_owner``): sent only while it is this client's live session.
        Once it is not, the node went with it (or will), and may be someone
        else's node now: nothing is sent, and ``HolderSessionLost`` is raised,
        except for a guaranteed delete, whose work is then done. ``czxid``: the
        node meant; a background attempt leaves a node with another ``czxid``
        (made again at that path meanwhile) alone.
        """
        _paths.validate_writable_path(path)
        conn = self._usable()
        full = self._abs(path)
        if recursive:
            if session is not None or czxid is not None:
                raise ConfigurationError("delete(recursive=True) takes no session= or czxid=")
            self.retry(lambda: self._delete_tree(full))
            return
        still = None
        if session is not None:
            try:
                still = holder_check(self._tracker, session, conn)
            except HolderSessionLost:
                if guaranteed:
                    return  # the node goes with the session that made it
                raise
        owner = self.session_id if session is None else session
        state = self.state
        if guaranteed and (state is None or not state.is_connected):
            # No point waiting for a request that cannot be sent now.
            log.info(
                "delete of %s queued until the connection is back",
                path,
                extra=fields("delete.queued", path=path, session_id=owner),
            )
            self._deleter.add(full, version, owner, bound=session is not None, czxid=czxid)
            return
        try:
            self._delete_abs(full, version, still)
        except NoNodeError:
            pass
        except HolderSessionLost:
            if not guaranteed:
                raise
        except (ConnectionLostError, ZkTimeoutError, SessionLost):
            if not guaranteed:
                raise
            log.info(
                "delete of %s failed; retrying in the background",
                path,
                extra=fields("delete.queued", path=path, session_id=owner),
            )
            self._deleter.add(full, version, owner, bound=session is not None, czxid=czxid)

    def _delete_abs(self, path: str, version: int, still: Still | None = None) -> None:
        self._live_conn().delete_async(path, version, still).result(self._op_timeout)

    def _holder_check(self, session: int) -> Still:
        """The write-time check of a write as the holder of ``session``'s node (bound.py)."""
        return holder_check(self._tracker, session, self._live_conn())

    def cancel_pending_delete(self, path: str) -> bool:
        """Drop a guaranteed delete of ``path`` still pending; True if there was one.

        For a recipe that takes a node it had asked to delete back as its own
        (a registration made again on the same session while the delete of the
        earlier one waited for the connection): once this returns, no delete
        of ``path`` queued before it will be sent (an attempt under way is
        waited for, up to the connection timeout).
        """
        _paths.validate_writable_path(path)
        return self._deleter.cancel(self._abs(path), self._op_timeout)

    def _delete_tree(self, full: str) -> None:
        try:
            children = self._usable().get_children_async(full).result(self._op_timeout)
        except NoNodeError:
            return
        for child in children:
            self._delete_tree(_paths.join(full, child))
        with contextlib.suppress(NoNodeError):
            self._delete_abs(full, -1)

    def pending_deletes(self) -> list[str]:
        """Paths a guaranteed delete is still working on (relative to the namespace)."""
        return [self._rel(p) for p in self._deleter.pending()]

    def wait_for_deletes(self, timeout: float) -> bool:
        """Wait until no guaranteed delete is pending; False on timeout."""
        return self._deleter.wait_empty(timeout)

    def sync(self, path: str = "/") -> None:
        """Make this client's server catch up with the leader for ``path``."""
        _paths.validate_path(path)
        self._usable().sync_async(self._abs(path)).result(self._op_timeout)

    # Async building blocks for recipes that pipeline requests.
    def create_async(
        self,
        path: str,
        data: bytes = b"",
        *,
        mode: CreateMode = CreateMode.PERSISTENT,
        acl: tuple[Acl, ...] | None = None,
    ) -> Pending[CreateResult]:
        """Send a create without waiting; ``.result(timeout)`` gives the CreateResult."""
        _paths.validate_writable_path(path)
        data = self._checked_data(data, path)
        mode = CreateMode.checked(mode)
        if mode.is_ttl:
            raise ConfigurationError("create_async does not take TTL modes: use create(ttl=)")
        return (
            self._usable()
            .create_async(self._abs(path), data, mode, acl)
            .map(lambda r: CreateResult(self._rel(r[0]), r[1]))
        )

    def get_children_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[list[str]]:
        _paths.validate_path(path)
        return self._usable().get_children_async(self._watched(path, watch), watch)

    def get_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[tuple[bytes, ZnodeStat]]:
        _paths.validate_path(path)
        return self._usable().get_async(self._watched(path, watch), watch)

    def exists_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[ZnodeStat | None]:
        _paths.validate_path(path)
        return self._usable().exists_async(self._watched(path, watch), watch)

    def delete_async(
        self, path: str, version: int = -1, *, session: int | None = None
    ) -> Pending[None]:
        """Send a delete without waiting (no guarantee: see ``delete(guaranteed=True)``).

        ``session``: as the holder of that session's node (``delete``).
        """
        _paths.validate_writable_path(path)
        conn = self._usable()
        still = None if session is None else holder_check(self._tracker, session, conn)
        return conn.delete_async(self._abs(path), version, still)

    def set_async(
        self, path: str, data: bytes, version: int = -1, *, session: int | None = None
    ) -> Pending[ZnodeStat]:
        """Send a set without waiting; ``session``: as the holder of its node (``set``)."""
        _paths.validate_writable_path(path)
        data = _paths.validate_data(data, path=path, limit=self.settings.max_data_bytes)
        conn = self._usable()
        still = None if session is None else holder_check(self._tracker, session, conn)
        return conn.set_async(self._abs(path), data, version, still)
