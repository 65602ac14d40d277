"""``ZkClient.transaction()``: Curator's multi-transaction, all or nothing, results per operation.

::

    with client.transaction() as tx:          # committed when the block ends
        tx.check("/config", version=7)
        tx.create("/jobs/j-", b"...", mode=CreateMode.PERSISTENT_SEQUENTIAL)
        tx.set("/config", b"new", version=7)
        tx.delete("/jobs/old")
    path, stat = tx.results[1]

One ``multi`` request (opcode 14). Its results come back per operation: a
create's ``CreateResult(path, stat)`` (kazoo's Transaction reads no stat),
a set's ``ZnodeStat``, None for delete and check. When the server refuses
it, nothing was applied and ``TransactionFailedError`` names the operation
that failed and why (``cause``: NodeExistsError, BadVersionError, ...).

**A lost reply.** A transaction whose connection (or session) went before
its reply came may or may not have been applied. A protected create in it
(``create(..., protected=True)``: Curator's ``_c_<uuid>-`` name) tells: its
node found, the transaction was applied (``recovered`` is True and the
results hold what could be read back: the protected creates' path and
stat, None for the rest); not found, it was not, and it is sent again
(once). A persistent protected node tells across sessions; an ephemeral one
only while the session that sent it lives (it goes with that session). With
no protected create that can tell, ``TransactionOutcomeUnknown`` says so:
never a guessed success, never a blind resend.

**As the holder.** ``ZkClient.transaction(session=...)`` binds the
transaction to the session that made a node it writes as the holder of (a
queue claim's ``check`` and the consumer's writes): it is sent only while that
session is the client's (checked where the request is written,
``kazoo/bound.py``), else ``HolderSessionLost`` and nothing was sent. A path
and a version name a node only while its session lives: the next holder's
node at the same path starts at the same version.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from zk_recipes import _paths
from zk_recipes._client.creates import CreateResult, Creator
from zk_recipes._client.kazoo import KazooConnection
from zk_recipes._client.kazoo.multi import TxOp
from zk_recipes._errors import (
    ClientStateError,
    ConfigurationError,
    ConnectionLostError,
    HolderSessionLost,
    OperationTimeoutError,
    RecipeUsageError,
    SessionLost,
    TransactionFailedError,
    TransactionOutcomeUnknown,
    ZkRecipesError,
)
from zk_recipes._settings import ClientSettings
from zk_recipes._types import Acl, CreateMode, ZnodeStat

T = TypeVar("T")


class _Client(Protocol):
    """What a transaction needs of its ZkClient."""

    @property
    def _op_timeout(self) -> float: ...

    @property
    def session_id(self) -> int: ...

    _creator: Creator

    def _usable(self) -> KazooConnection: ...

    def _abs(self, path: str) -> str: ...

    def _holder_check(self, session: int) -> Callable[[], bool]: ...

    def _rel(self, path: str) -> str: ...

    def _checked_data(self, data: object, path: str) -> bytes: ...

    settings: ClientSettings

    def wait_connected(self, timeout: float | None) -> bool: ...


#: A transaction's results: one per operation, in order.
Results = list[CreateResult | ZnodeStat | str | None]


class Transaction:
    """Operations to apply together; ``commit()`` (or the end of a ``with`` block) sends them."""

    def __init__(self, client: _Client, *, session: int | None = None) -> None:
        self._client = client
        #: Committed as the holder of this session's node (None: on any session).
        self._session = session
        self._ops: list[TxOp] = []
        #: For each protected create: (index, parent, name prefix, ephemeral).
        self._protected: list[tuple[int, str, str, bool]] = []
        self._sent = False
        #: The results, once committed: CreateResult, ZnodeStat or None per operation.
        self.results: Results | None = None
        #: True when the reply was lost and a protected create showed it was applied.
        self.recovered = False

    # -- building -------------------------------------------------------------
    def check(self, path: str, version: int) -> Transaction:
        """Fail the whole transaction unless ``path`` is at ``version``."""
        self._add(TxOp("check", self._path(path), version=_version(version)))
        return self

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        mode: CreateMode = CreateMode.PERSISTENT,
        acl: Sequence[Acl] | None = None,
        ttl: float | None = None,
        protected: bool = False,
    ) -> Transaction:
        """Create ``path`` (any mode; ``protected``: Curator's ``_c_<uuid>-`` name, see above)."""
        mode = CreateMode.checked(mode)
        ttl_ms = None
        checked_ttl = mode.check_ttl(ttl)
        if checked_ttl is not None:
            ttl_ms = int(checked_ttl * 1000)
        full = self._path(path)
        if protected:
            prefix = _paths.protected_prefix(_paths.new_protected_id())
            parent = _paths.parent_of(full)
            self._protected.append((len(self._ops), parent, prefix, mode.is_ephemeral))
            full = _paths.join(parent, prefix + _paths.name_of(full))
        data = self._client._checked_data(data, path)
        self._add(TxOp("create", full, data, mode=mode.value, acl=_acl(acl), ttl=ttl_ms))
        return self

    def set(self, path: str, data: bytes, version: int = -1) -> Transaction:
        """Set ``path``'s data (at ``version``, or any with -1)."""
        data = self._client._checked_data(data, path)
        self._add(TxOp("set", self._path(path), data, version=_version(version)))
        return self

    def delete(self, path: str, version: int = -1) -> Transaction:
        """Delete ``path`` (at ``version``, or any with -1)."""
        self._add(TxOp("delete", self._path(path), version=_version(version)))
        return self

    def __len__(self) -> int:
        return len(self._ops)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None and not self._sent:
            self.commit()

    # -- sending ----------------------------------------------------------------
    def commit(self, timeout: float | None = None, *, stats: bool = True) -> Results:
        """Apply every operation or none; the results per operation.

        ``TransactionFailedError`` when the server refused it (nothing
        applied); ``TransactionOutcomeUnknown`` when the reply was lost and no
        protected create can tell. An empty transaction commits nothing.
        A create's result carries its stat; ZooKeeper 3.8.0 sends a create in
        a multi back with its path only (not a container's), and the stat is
        then read (one ``exists`` per create): ``stats=False`` skips that, and
        such a create's result is its path (a str).
        """
        if self._sent:
            raise RecipeUsageError("this transaction was committed already: make a new one")
        self._sent = True
        if not self._ops:
            self.results = []
            return self.results
        client = self._client
        wait = client._op_timeout if timeout is None else timeout
        for _attempt in range(2):
            try:
                session = client.session_id
                conn = client._usable()
                holder = self._session
                still = None if holder is None else client._holder_check(holder)
                pending = conn.multi_async(self._ops, still)
            except (ConnectionLostError, ClientStateError, HolderSessionLost):
                raise  # not sent: nothing applied, and the caller decides
            try:
                raw = pending.result(wait)
            except HolderSessionLost:
                raise  # refused unsent: nothing applied
            except (ConnectionLostError, OperationTimeoutError, SessionLost) as exc:
                markers = self._markers(session, lost=isinstance(exc, SessionLost))
                if not markers:
                    raise TransactionOutcomeUnknown(
                        f"the connection went while a transaction of {len(self._ops)} "
                        f"operations was sent ({self._describe(0)}, ...): it may or may not "
                        "have been applied. Check before sending it again, or give it a "
                        "protected create (create(..., protected=True); a persistent one "
                        "tells across sessions), whose node tells"
                    ) from exc
                applied = self._connected(functools.partial(self._applied, markers))
                if not applied and markers[0][3] and client.session_id != session:
                    raise TransactionOutcomeUnknown(
                        "the session that sent a transaction ended while its reply was "
                        "awaited: its ephemeral protected node tells nothing any more"
                    ) from exc
                if applied:
                    self.recovered = True
                    self.results = self._connected(self._recovered_results)
                    return self.results
                continue  # not applied: send it again, on this connection or the next
            self.results = self._results(raw, stats)
            return self.results
        raise TransactionOutcomeUnknown(
            "a transaction lost its reply twice and was not applied; try again later"
        )

    def _results(self, raw: list[tuple[Any, ...]], stats: bool = True) -> Results:
        failed = [i for i, r in enumerate(raw) if r[0] == "error" and r[1] is not None]
        if failed:
            index = failed[0]
            cause: ZkRecipesError = raw[index][1]
            what = self._describe(index)
            raise TransactionFailedError(
                f"operation {index + 1} of {len(raw)} ({what}) failed, so none was applied: "
                f"{type(cause).__name__}: {cause}",
                index,
                what,
                cause,
            )
        results: Results = []
        for result in raw:
            if result[0] == "create":
                stat = result[2]
                if stat is None and not stats:
                    results.append(self._client._rel(result[1]))
                    continue
                if stat is None:  # ZooKeeper 3.8.0 answers a create in a multi with its path only
                    stat = self._client._usable().exists_async(result[1]).result()
                results.append(CreateResult(self._client._rel(result[1]), stat))
            elif result[0] == "set":
                results.append(result[1])
            else:
                results.append(None)
        return results

    def _found(self, parent: str, prefix: str) -> str | None:
        """The protected node of ``prefix`` under ``parent`` (absolute), as the leader has it.

        The creates' own search (``Creator.find``): a sync first, so a lagging
        follower cannot answer "not there" for a transaction it has not seen yet.
        """
        found = self._client._creator.find(parent, [prefix])
        return found[0] if found else None

    def _connected(self, fn: Callable[[], T]) -> T:
        """``fn()`` once a connection (perhaps of a new session) is up; tried again on a loss."""
        client = self._client
        deadline = time.monotonic() + 2 * client.settings.connection_timeout
        while True:
            client.wait_connected(max(0.0, deadline - time.monotonic()))
            try:
                return fn()
            except (ConnectionLostError, SessionLost, ClientStateError):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def _markers(self, session: int, *, lost: bool) -> list[tuple[int, str, str, bool]]:
        """The protected creates that can tell whether the transaction was applied."""
        same = not lost and self._client.session_id == session
        return [m for m in self._protected if not m[3] or same]

    def _applied(self, markers: list[tuple[int, str, str, bool]]) -> bool:
        """After a lost reply: whether the first telling protected create's node exists."""
        _index, parent, prefix, _ephemeral = markers[0]
        return self._found(parent, prefix) is not None

    def _recovered_results(self) -> Results:
        results: Results = [None] * len(self._ops)
        conn = self._client._usable()
        for index, parent, prefix, _ephemeral in self._protected:
            path = self._found(parent, prefix)
            if path is not None:
                with contextlib.suppress(ZkRecipesError):
                    stat = conn.exists_async(path).result(self._client._op_timeout)
                    if stat is not None:
                        results[index] = CreateResult(self._client._rel(path), stat)
        return results

    # -- helpers ---------------------------------------------------------------
    def _add(self, op: TxOp) -> None:
        if self._sent:
            raise RecipeUsageError("this transaction was committed already: make a new one")
        self._ops.append(op)

    def _path(self, path: str) -> str:
        _paths.validate_path(path)
        return self._client._abs(path)

    def _describe(self, index: int) -> str:
        op = self._ops[index]
        return f"{op.kind} {self._client._rel(op.path)}"

    def __repr__(self) -> str:
        ops = ", ".join(self._describe(i) for i in range(len(self._ops)))
        return f"<Transaction [{ops}]{' committed' if self._sent else ''}>"


def _version(version: int) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or version < -1:
        raise ConfigurationError(f"version must be an int >= -1 (-1: any), got {version!r}")
    return version


def _acl(acl: Sequence[Acl] | None) -> tuple[object, ...] | None:
    return None if acl is None else tuple(acl)
