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
- **The connection's life** (start, close, a connection that ends by itself,
  fork, exit) is the ``ConnectionHolder``'s (_client/connection_holder.py):
  close() ends every hold before the server can hand it to anyone else, with
  this client's pending guaranteed deletes given their chance first, while
  the session is still ours (``_drain_deletes``).
- **What the client tells** (state, session, connection facts, listeners,
  the guards and the namespace mapping) is ``SessionView``'s
  (_client/session_view.py); **watches** beyond a read's one-shot ``watch=``
  (persistent, catch-up after a reconnect) are ``WatchRequests``'
  (_client/watch_requests.py). ZkClient inherits both: one object to hold.

Size: over the house limit (tests/test_module_sizes.py): ZkClient's node operations (create,
get, set, delete, transactions, their async forms) are thin — validate, make
the path absolute, hand over to the adapter — and kept together to read in
one place; everything with logic of its own lives in its collaborators
(connection_holder.py, session.py, creates.py, deletes.py, persistent.py).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, final

from zk_recipes import _metrics, _paths
from zk_recipes._client.awaitable import AsyncRequests
from zk_recipes._client.connection_holder import ConnectionHolder
from zk_recipes._client.creates import CreateResult, Creator
from zk_recipes._client.deletes import Attempt, GuaranteedDeleter, attempt_steps
from zk_recipes._client.ensemble import Ensemble
from zk_recipes._client.ensemble_tracking import EnsembleFollower, reconfigure
from zk_recipes._client.holder import holder_check
from zk_recipes._client.kazoo import KazooConnection, Pending
from zk_recipes._client.kazoo.bound import Still
from zk_recipes._client.persistent import PersistentWatches
from zk_recipes._client.states import ConnectionState, ListenerRegistry
from zk_recipes._client.steps import Steps, call_step, no_steps, run_blocking
from zk_recipes._client.transaction import Transaction
from zk_recipes._client.watch_requests import WatchRequests
from zk_recipes._errors import (
    ConfigurationError,
    HolderSessionLost,
    NoNodeError,
    TransactionFailedError,
    TransactionOutcomeUnknown,
    WrongTypeError,
)
from zk_recipes._logfields import fields
from zk_recipes._retry import retry
from zk_recipes._settings import ClientSettings
from zk_recipes._types import Acl, CreateMode, WatchCallback, ZnodeStat

log = logging.getLogger("zk_recipes.client")

T = TypeVar("T")


@final
class ZkClient(WatchRequests):
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
        self._listeners = ListenerRegistry()
        self._holder = ConnectionHolder(
            settings,
            self._listeners,
            event_path=self._rel,
            before_session_ends=self._drain_deletes,
        )
        self._tracker = self._holder.tracker
        self._deleter = GuaranteedDeleter(self, self._delete_backoff)
        self._creator = Creator(self, self._deleter, settings.session_timeout)
        self._persistent = PersistentWatches(self)
        self._ensemble = EnsembleFollower.of(self, settings, self._holder.use_hosts)
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
        self._holder.start(timeout, refused_ends=refused_ends)
        return self

    def close(self) -> None:
        """Close the session: every hold ends, the server deletes our ephemeral nodes. Idempotent.

        Recipes hear CLOSED (a lock's ``lost`` is set, ``is_held()`` turns
        False, ``check()`` raises) before the server lets anyone else take
        what this client held.
        """
        self._holder.close()

    @property
    def ensemble(self) -> Ensemble | None:
        """The ensemble as its own config names it, followed for reconnecting (None: not
        followed: ``track_ensemble=False``, not read yet, or the server does not allow it)."""
        return self._ensemble.ensemble if self._ensemble is not None else None

    def reconfig(
        self,
        *,
        joining: Sequence[str] = (),
        leaving: Sequence[int] = (),
        new_members: Sequence[str] = (),
        from_config: int = -1,
    ) -> Ensemble:
        """Change the membership (dynamic reconfiguration): ``ensemble_tracking.reconfigure``."""
        return reconfigure(self, joining, leaving, new_members, from_config)

    def wait_ensemble(self, timeout: float) -> Ensemble | None:
        """``ensemble``, once this connection's read of the config answered (None: not followed)."""
        return self._ensemble.wait(timeout) if self._ensemble is not None else None

    def _drain_deletes(self, conn: KazooConnection | None) -> None:
        """close()'s last work while the session is ours: the pending guaranteed deletes."""
        if conn is not None and self._deleter.pending():
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

    def _metric_snapshot(self) -> tuple[str | None, int]:
        """For the scrape-time gauges: (state name, None once closed; deletes pending)."""
        state = self._tracker.state
        if self.is_closed or state is None or state is ConnectionState.CLOSED:
            return None, 0
        return state.name, self._deleter.pending_count()

    def __enter__(self) -> ZkClient:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        current = self._tracker.state
        state = "closed" if self.is_closed else (current.name if current else "not started")
        return (
            f"<ZkClient {self.settings.hosts}{self.settings.namespace} {state}"
            f" session={self.session_id:#x}>"
        )

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
        return run_blocking(
            self.create_and_list_steps(
                path,
                data,
                mode=mode,
                acl=acl,
                protected=protected,
                parents=parents,
                timeout=timeout,
            )
        )

    def create_and_list_steps(
        self,
        path: str,
        data: bytes = b"",
        *,
        mode: CreateMode = CreateMode.EPHEMERAL_SEQUENTIAL,
        acl: tuple[Acl, ...] | None = None,
        protected: bool = True,
        parents: bool = True,
        timeout: float | None = None,
    ) -> Steps[tuple[CreateResult, list[str] | None]]:
        """``create_and_list`` as steps (_client/steps.py), for the recipes' asyncio forms.

        The arguments are checked now, before the first step.
        """
        _paths.validate_writable_path(path)
        data = self._checked_data(data, path)
        mode = CreateMode.checked(mode)
        self._usable()
        return self._creator.create_and_list_steps(
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
        run_blocking(
            self.delete_steps(
                path,
                version,
                guaranteed=guaranteed,
                recursive=recursive,
                session=session,
                czxid=czxid,
            )
        )

    def delete_steps(
        self,
        path: str,
        version: int = -1,
        *,
        guaranteed: bool = False,
        recursive: bool = False,
        session: int | None = None,
        czxid: int | None = None,
    ) -> Steps[None]:
        """``delete`` as steps (_client/steps.py), for the recipes' asyncio forms.

        The arguments are checked now, before the first step.
        """
        _paths.validate_writable_path(path)
        conn = self._usable()
        full = self._abs(path)
        if recursive:
            if session is not None or czxid is not None:
                raise ConfigurationError("delete(recursive=True) takes no session= or czxid=")
            return call_step(lambda: self.retry(lambda: self._delete_tree(full)))
        still = None
        if session is not None:
            try:
                still = holder_check(self._tracker, session, conn)
            except HolderSessionLost:
                if guaranteed:
                    return no_steps()  # the node goes with the session that made it
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
            return no_steps()
        return attempt_steps(
            lambda: self._live_conn().delete_async(full, version, still),
            self._op_timeout,
            self._deleter if guaranteed else None,
            Attempt(full, version, owner, bound=session is not None, czxid=czxid, shown=path),
        )

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

    @property
    def aio(self) -> AsyncRequests:
        """The client's requests as coroutines, for asyncio code: ``await zk.aio.get(path)``.

        ``zk.aio.states()`` iterates over connection state changes. The
        recipes' asyncio forms are in ``zk_recipes.aio`` (docs/asyncio.md).
        """
        return AsyncRequests(self)

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
