"""ZkClient: one managed ZooKeeper session, with Curator's state model.

Design notes.

- **States and simulated expiry** live in _client/session.py (SessionTracker):
  Curator's five states, LOST declared locally when the server has been
  silent for too long, abandoned sessions closed on the server.
- **Listeners** run on threads of their own, never kazoo's (_client/states.py).
- **Namespace.** Paths are relative to ``namespace`` (a chroot-like prefix
  created lazily as a CONTAINER). kazoo's own chroot is not used: it cannot
  create its root and warns when the root is missing.
- **Fork.** A kazoo client does not survive fork() (its threads are gone and
  its socket is shared with the parent). A client used in a forked child
  raises ClientStateError; ``close()`` in the child only forgets the client,
  never touching the parent's session. Create clients after forking (the
  framework integrations do).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TypeVar

from zk_recipes import _paths
from zk_recipes._acl import Acl
from zk_recipes._client.deletes import GuaranteedDeleter
from zk_recipes._client.kazoo import (
    CreateMode,
    KazooConnection,
    Pending,
    WatchCallback,
    WatchEvent,
    ZnodeStat,
    run_in_thread,
)
from zk_recipes._client.session import SessionTracker
from zk_recipes._client.states import ConnectionState, ListenerRegistry, StateListener
from zk_recipes._errors import (
    ClientStateError,
    ConnectionLostError,
    ConnectTimeoutError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    UnsupportedFeatureError,
    ZkTimeoutError,
)
from zk_recipes._retry import retry
from zk_recipes._settings import ClientSettings

log = logging.getLogger("zk_recipes.client")

T = TypeVar("T")

#: How many times a create re-makes missing parents before giving up (container
#: parents can be reaped by the server between our mkdir and our create).
_PARENT_ATTEMPTS = 5


class CreateResult(NamedTuple):
    """What a create returns: the node's path (relative to the namespace) and its stat."""

    path: str
    stat: ZnodeStat


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


class ZkClient:
    """A managed ZooKeeper client: ``ZkClient("zk1:2181,zk2:2181", namespace="myapp")``.

    Use as a context manager, or call ``start()`` and ``close()``. Options are
    the fields of :class:`ClientSettings`; pass ``settings=`` to reuse one.
    """

    def __init__(
        self, hosts: str | None = None, *, settings: ClientSettings | None = None, **options: Any
    ) -> None:
        if settings is not None:
            if hosts is not None or options:
                settings = settings.replace(**({"hosts": hosts} if hosts else {}), **options)
        elif hosts is None:
            raise ClientStateError("ZkClient needs hosts, e.g. ZkClient('127.0.0.1:2181')")
        else:
            settings = ClientSettings(hosts=hosts, **options)
        self.settings = settings
        self._lock = threading.Lock()
        self._listeners = ListenerRegistry()
        self._tracker = SessionTracker(settings, self._listeners)
        self._conn: KazooConnection | None = None
        self._started = False
        self._closed = False
        self._forked = False
        self._container_fallback = False
        self._deleter = GuaranteedDeleter(self, self._delete_backoff)
        self._wakeups: set[threading.Event] = set()
        self._starting: threading.Event | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float | None = None) -> ZkClient:
        """Connect and establish a session; raise ConnectTimeoutError if not done in ``timeout`` s.

        Idempotent: starting a started client does nothing.
        """
        if timeout is None:
            timeout = self.settings.connection_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(
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
                    conn = self._conn = KazooConnection(self.settings, self._tracker.on_raw_state)
                    self._tracker.attach(conn)
                    self._started = True
                    starting = self._starting = threading.Event()
                    break
            # Another thread is starting this client: return once it is connected,
            # never before (a request sent while kazoo is CONNECTING fails); if that
            # start fails, try again ourselves in the time left.
            waited = True
            if not concurrent.wait(max(0.0, deadline - time.monotonic())):
                raise ConnectTimeoutError(
                    f"no session with {self.settings.hosts} within {timeout:g}s "
                    "(another thread's start() of this client was still connecting)"
                )
            if deadline - time.monotonic() <= 0 and not self.is_started:
                raise ConnectTimeoutError(
                    f"no session with {self.settings.hosts} within {timeout:g}s "
                    "(another thread's start() of this client failed)"
                )
        try:
            conn.start(max(0.001, deadline - time.monotonic()) if waited else timeout)
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

    def close(self) -> None:
        """Close the session: the server deletes our ephemeral nodes at once. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conn, self._conn = self._conn, None
            wakeups, self._wakeups = self._wakeups, set()
            starting = self._starting
        for event in wakeups:
            event.set()
        if starting is not None:
            # kazoo cannot stop a start it has not begun yet (the session would be
            # made afterwards and live on): let the start end, then stop it.
            starting.wait(self.settings.connection_timeout)
        self._tracker.close()
        _live_clients.discard(self)
        if conn is None:
            return
        if self._forked:
            conn.discard()
            return
        if conn.connected:
            # Give queued guaranteed deletes of persistent nodes one chance.
            self._deleter.wait_empty(min(1.0, self.settings.connection_timeout))
        self._deleter.stop()
        conn.stop()
        self._listeners.wait_idle(1.0)

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

    # ------------------------------------------------------------------ introspection
    @property
    def state(self) -> ConnectionState | None:
        """The last state told to listeners (None before the first connection)."""
        return self._tracker.state

    @property
    def session_id(self) -> int:
        """The current session id (0 when there is none)."""
        return self._tracker.session_id

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

    def wait_connected(self, timeout: float) -> bool:
        """Block until connected (CONNECTED/RECONNECTED/READ_ONLY); False on timeout."""
        return self._tracker.wait_connected(timeout)

    # ------------------------------------------------------------------ guards
    def _check_fork(self) -> None:
        if self._forked:
            raise ClientStateError(
                "this ZkClient was started in a parent process and cannot be used after fork(): "
                "a ZooKeeper session cannot be shared between processes. Create the client in "
                "the child (after the fork), e.g. in Celery's worker_process_init; the "
                "zk_recipes framework integrations do this for you."
            )

    def _usable(self) -> KazooConnection:
        self._check_fork()
        conn = self._conn
        if conn is None:
            if self._closed:
                raise ClientStateError("this ZkClient is closed; create a new one")
            raise ClientStateError("this ZkClient is not started; call start() or use `with`")
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
    def _watch(self, watch: WatchCallback | None) -> WatchCallback | None:
        if watch is None or not self.settings.namespace:
            return watch

        def _relative(event: WatchEvent) -> object:
            return watch(WatchEvent(event.type, self._rel(event.path) if event.path else None))

        return _relative

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
        data = _paths.validate_data(data, path=path, limit=self.settings.max_data_bytes)
        if not isinstance(mode, CreateMode):
            raise TypeError(f"mode must be a CreateMode, got {mode!r}")
        if mode.is_ttl and (ttl is None or not ttl > 0):
            raise ValueError(f"{mode.name} needs a positive ttl= in seconds, got {ttl!r}")
        if not mode.is_ttl and ttl is not None:
            raise ValueError(f"ttl= only applies to TTL modes, not {mode.name}")
        if replace_stale and mode is not CreateMode.EPHEMERAL:
            raise ValueError("replace_stale=True only applies to CreateMode.EPHEMERAL")
        self._usable()
        full = self._abs(path)
        if protected:
            return self._create_protected(full, data, mode, acl, ttl, parents)
        attempts = 0

        def attempt() -> CreateResult:
            nonlocal attempts
            attempts += 1
            try:
                return self._create_abs(full, data, mode, acl, ttl, parents)
            except NodeExistsError:
                if mode.is_ephemeral and not mode.is_sequential:
                    stat = self._exists_abs(full)
                    owner = stat.ephemeral_owner if stat is not None else 0
                    if stat is not None and owner == self.session_id and attempts > 1:
                        return CreateResult(path, stat)  # our own create, reply lost
                    if replace_stale and owner in self._tracker.earlier_sessions():
                        log.info("replacing %s left by our earlier session %#x", path, owner)
                        assert stat is not None
                        with contextlib.suppress(NoNodeError):
                            self._delete_abs(full, stat.version)
                        return self._create_abs(full, data, mode, acl, ttl, parents)
                raise

        return self.retry(attempt) if retry else attempt()

    def _create_abs(
        self,
        full: str,
        data: bytes,
        mode: CreateMode,
        acl: tuple[Acl, ...] | None,
        ttl: float | None,
        parents: bool,
    ) -> CreateResult:
        for _ in range(_PARENT_ATTEMPTS):
            try:
                created, stat = self._send_create(full, data, mode, acl, ttl)
                return CreateResult(self._rel(created), stat)
            except NoNodeError:
                parent = _paths.parent_of(full)
                if parent == "/" or not (parents or self._is_namespace_root(parent)):
                    raise NoNodeError(
                        f"cannot create {self._rel(full)}: its parent {self._rel(parent)} does "
                        "not exist (pass parents=True to create it)",
                        self._rel(full),
                    ) from None
                # A container on the way may be reaped between our exists and our
                # create; the next round of the loop starts over.
                with contextlib.suppress(NoNodeError):
                    self._ensure_abs(parent)
        raise NoNodeError(f"parents of {self._rel(full)} keep vanishing", self._rel(full))

    def _is_namespace_root(self, full_parent: str) -> bool:
        return bool(self.settings.namespace) and full_parent == self.settings.namespace

    def _send_create(
        self,
        full: str,
        data: bytes,
        mode: CreateMode,
        acl: tuple[Acl, ...] | None,
        ttl: float | None,
    ) -> tuple[str, ZnodeStat]:
        conn = self._usable()
        if mode is CreateMode.CONTAINER and self._container_fallback:
            mode = CreateMode.PERSISTENT
        try:
            return conn.create_async(full, data, mode, acl, ttl).result(self._op_timeout)
        except UnsupportedFeatureError:
            if mode is not CreateMode.CONTAINER:
                raise UnsupportedFeatureError(
                    f"the ZooKeeper server does not support {mode.name} nodes (needs 3.5.3+, "
                    "and TTL nodes need zookeeper.extendedTypesEnabled=true on the server)"
                ) from None
            self._container_fallback = True
            message = (
                "the ZooKeeper server does not support CONTAINER nodes (older than 3.5): "
                "falling back to PERSISTENT parents, which the server will not reap"
            )
            log.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=4)
            return conn.create_async(full, data, CreateMode.PERSISTENT, acl, ttl).result(
                self._op_timeout
            )

    def ensure_path(self, path: str) -> None:
        """Make ``path`` and its missing ancestors exist, as CONTAINER nodes."""
        _paths.validate_writable_path(path)
        self._usable()
        self.retry(lambda: self._ensure_abs(self._abs(path)))

    def _ensure_abs(self, full: str) -> None:
        # Bottom up: usually only the last level is missing (a new key under an
        # existing prefix), which then costs one create instead of Curator's
        # exists-then-create per level from the root.
        missing: list[str] = []
        path = full
        while path != "/":
            try:
                self._send_create(path, b"", CreateMode.CONTAINER, None, None)
                break
            except NodeExistsError:
                break
            except NoNodeError:
                missing.append(path)
                path = _paths.parent_of(path)
            except NoAuthError:
                # No CREATE right here: fine if the node exists already.
                if self._exists_abs(path) is None:
                    raise
                break
        for ancestor in reversed(missing):  # top down from the first one missing
            with contextlib.suppress(NodeExistsError):
                self._send_create(ancestor, b"", CreateMode.CONTAINER, None, None)

    def _create_protected(
        self,
        full: str,
        data: bytes,
        mode: CreateMode,
        acl: tuple[Acl, ...] | None,
        ttl: float | None,
        parents: bool,
        *,
        protected_id: str = "",
    ) -> CreateResult:
        # protected_id: the prefix of a first attempt already sent by the caller.
        prefix = protected_id or _paths.protected_prefix(_paths.new_protected_id())
        parent = _paths.parent_of(full)
        node = _paths.join(parent, prefix + _paths.name_of(full))
        tried = bool(protected_id)

        def attempt() -> CreateResult:
            nonlocal tried
            if tried:
                found = self._find_protected(parent, prefix)
                if found is not None:
                    stat = self._exists_abs(found)
                    if stat is not None:
                        if not mode.is_ephemeral or stat.ephemeral_owner == self.session_id:
                            return CreateResult(self._rel(found), stat)
                        # Created by a session that is gone or going (CURATOR-498).
                        self._deleter.add(found, -1, stat.ephemeral_owner)
            tried = True
            return self._create_abs(node, data, mode, acl, ttl, parents)

        try:
            return self.retry(attempt)
        except (Exception, KeyboardInterrupt) as exc:
            # NoNode/NodeExists are the server's definite "not created"; after
            # anything else (lost connection, timeout, interrupt) a node of ours
            # may exist, so look for it in the background.
            if tried and not isinstance(exc, (NoNodeError, NodeExistsError)):
                run_in_thread(
                    "zk-recipes protected cleanup",
                    lambda: self._delete_protected(parent, prefix),
                )
            raise

    def _find_protected(self, parent: str, prefix: str) -> str | None:
        try:
            children = self._usable().get_children_async(parent).result(self._op_timeout)
        except NoNodeError:
            return None
        for child in children:
            if child.startswith(prefix):
                return _paths.join(parent, child)
        return None

    def _delete_protected(self, parent: str, prefix: str) -> None:
        """Background: delete what a failed protected create may have left."""
        if not self._wait_usable(self.settings.session_timeout):
            return
        try:
            found = self._find_protected(parent, prefix)
        except Exception:
            log.debug("protected cleanup under %s could not list", parent, exc_info=True)
            return
        if found is not None:
            self._deleter.add(found, -1, 0)

    def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, ZnodeStat]:
        """The node's data and stat; ``watch`` fires once on change or delete."""
        _paths.validate_path(path)
        return (
            self._usable().get_async(self._abs(path), self._watch(watch)).result(self._op_timeout)
        )

    def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        _paths.validate_path(path)
        return (
            self._usable()
            .get_children_async(self._abs(path), self._watch(watch))
            .result(self._op_timeout)
        )

    def exists(self, path: str, watch: WatchCallback | None = None) -> ZnodeStat | None:
        _paths.validate_path(path)
        return (
            self._usable()
            .exists_async(self._abs(path), self._watch(watch))
            .result(self._op_timeout)
        )

    def _exists_abs(self, path: str) -> ZnodeStat | None:
        return self._usable().exists_async(path).result(self._op_timeout)

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        _paths.validate_writable_path(path)
        data = _paths.validate_data(data, path=path, limit=self.settings.max_data_bytes)
        return self._usable().set_async(self._abs(path), data, version).result(self._op_timeout)

    def delete(
        self, path: str, version: int = -1, *, guaranteed: bool = False, recursive: bool = False
    ) -> None:
        """Delete a node.

        ``guaranteed``: if the connection fails, keep retrying in the background
        until the node is gone (or belongs to someone else). ``recursive``:
        delete the children first. A missing node is not an error.
        """
        _paths.validate_writable_path(path)
        self._usable()
        full = self._abs(path)
        if recursive:
            self.retry(lambda: self._delete_tree(full))
            return
        session = self.session_id
        state = self.state
        if guaranteed and (state is None or not state.is_connected):
            # No point waiting for a request that cannot be sent now.
            log.info("delete of %s queued until the connection is back", path)
            self._deleter.add(full, version, session)
            return
        try:
            self._delete_abs(full, version)
        except NoNodeError:
            pass
        except (ConnectionLostError, ZkTimeoutError):
            if not guaranteed:
                raise
            log.info("delete of %s failed; retrying in the background", path)
            self._deleter.add(full, version, session)

    def _delete_abs(self, path: str, version: int) -> None:
        self._usable().delete_async(path, version).result(self._op_timeout)

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

    def create_and_list(
        self,
        path: str,
        data: bytes = b"",
        *,
        mode: CreateMode = CreateMode.EPHEMERAL_SEQUENTIAL,
        acl: tuple[Acl, ...] | None = None,
        protected: bool = True,
        parents: bool = True,
    ) -> tuple[CreateResult, list[str]]:
        """Create a node and read its parent's children in the same round trip.

        The two requests are pipelined on one connection and the server answers
        them in order, so the list already holds the new node: this is the first
        step of every queue recipe (lock, semaphore, election) for the cost of
        one round trip. Protection and container parents as in ``create``.
        """
        _paths.validate_writable_path(path)
        data = _paths.validate_data(data, path=path, limit=self.settings.max_data_bytes)
        return self._create_and_list(path, data, mode, acl, protected, parents, _PARENT_ATTEMPTS)

    def _create_and_list(
        self,
        path: str,
        data: bytes,
        mode: CreateMode,
        acl: tuple[Acl, ...] | None,
        protected: bool,
        parents: bool,
        attempts: int,
    ) -> tuple[CreateResult, list[str]]:
        conn = self._usable()
        full = self._abs(path)
        parent = _paths.parent_of(full)
        prefix = _paths.protected_prefix(_paths.new_protected_id()) if protected else ""
        node = _paths.join(parent, prefix + _paths.name_of(full))
        deadline = time.monotonic() + self._op_timeout
        created_pending = conn.create_async(node, data, mode, acl)
        listed_pending = conn.get_children_async(parent)
        try:
            created, stat = created_pending.result(self._op_timeout)
        except NoNodeError:
            # The parent is missing: the server's definite "not created", so there is
            # no node of ours to look for. Make the parents, then pipeline again.
            if attempts <= 1 or (not parents and not self._is_namespace_root(parent)):
                raise NoNodeError(
                    f"cannot create {self._rel(node)}: its parent {self._rel(parent)} does "
                    "not exist" + (" (pass parents=True to create it)" if attempts > 1 else ""),
                    self._rel(node),
                ) from None
            with contextlib.suppress(NoNodeError, ConnectionLostError, ZkTimeoutError):
                listed_pending.result(max(0.001, deadline - time.monotonic()))
            self.retry(lambda: self._ensure_abs(parent))
            return self._create_and_list(path, data, mode, acl, protected, parents, attempts - 1)
        except (ConnectionLostError, ZkTimeoutError):
            # The reply was lost: the general (slower) path finds a node of ours if
            # the server made one, and retries.
            if protected:
                result = self._create_protected(
                    full, data, mode, acl, None, parents, protected_id=prefix
                )
            else:
                result = self.create(self._rel(full), data, mode=mode, acl=acl, parents=parents)
            return result, self.get_children(self._rel(parent))
        try:
            children = listed_pending.result(max(0.001, deadline - time.monotonic()))
        except (ConnectionLostError, ZkTimeoutError):
            children = self.retry(lambda: self.get_children(self._rel(parent)))
        return CreateResult(self._rel(created), stat), children

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
        data = _paths.validate_data(data, path=path, limit=self.settings.max_data_bytes)
        return (
            self._usable()
            .create_async(self._abs(path), data, mode, acl)
            .map(lambda r: CreateResult(self._rel(r[0]), r[1]))
        )

    def get_children_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[list[str]]:
        _paths.validate_path(path)
        return self._usable().get_children_async(self._abs(path), self._watch(watch))

    def get_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[tuple[bytes, ZnodeStat]]:
        _paths.validate_path(path)
        return self._usable().get_async(self._abs(path), self._watch(watch))

    def exists_async(
        self, path: str, watch: WatchCallback | None = None
    ) -> Pending[ZnodeStat | None]:
        _paths.validate_path(path)
        return self._usable().exists_async(self._abs(path), self._watch(watch))

    def delete_async(self, path: str, version: int = -1) -> Pending[None]:
        """Send a delete without waiting (no guarantee: see ``delete(guaranteed=True)``)."""
        _paths.validate_writable_path(path)
        return self._usable().delete_async(self._abs(path), version)

    def set_async(self, path: str, data: bytes, version: int = -1) -> Pending[ZnodeStat]:
        _paths.validate_writable_path(path)
        data = _paths.validate_data(data, path=path, limit=self.settings.max_data_bytes)
        return self._usable().set_async(self._abs(path), data, version)
