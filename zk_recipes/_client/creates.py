"""How ZkClient creates nodes: protected names, container parents, stale ephemerals, pipelining.

A collaborator of ZkClient, as the guaranteed deleter is: ZkClient checks the
arguments and hands over absolute paths; everything here can assume them valid.

- **Parents** are created bottom up as CONTAINER nodes (the server reaps them
  once empty): usually only the last level is missing (a new key under an
  existing prefix), which then costs one create instead of Curator's
  exists-then-create per level from the root. A parent reaped between our
  mkdir and our create is made again (a few times). Servers older than 3.5
  get PERSISTENT parents, with a warning, once.
- **Protected create** (Curator's ProtectedMode): the node's name starts with
  ``_c_<uuid>-``. After a lost reply, the next attempt lists the parent and
  looks for that prefix: a match owned by our live session (or any match, for
  a persistent node) *is* our node, and nothing is created twice. A match
  owned by a session that is gone (the reply was lost because the session
  expired, CURATOR-498) is deleted, and the next create uses a **fresh** id:
  reusing the prefix would make the following lookup find the dead node
  again, still there until its delete runs, and create a second one of ours
  (an orphan on our live session). The lookup first syncs the parent, so the
  server that answers has applied every create the leader committed, the
  unanswered one included: a lagging follower would otherwise say "not
  there" and a second node of ours would be made. Should two live matches of
  one prefix exist anyway, the oldest is ours and the others are deleted. A
  protected create that gives up leaves a background task that deletes
  whatever its prefixes may still have made, trying until it has looked once
  (or, for an ephemeral node, until its session is over).
- **create_and_list** pipelines the create with the parent's children read:
  one round trip for the first step of every queue recipe. Once a node of
  ours exists it never raises: if the list cannot be read it returns None for
  it, and the caller re-reads the queue under its own deadline. Raising then
  would leave a contender of our live session in the queue with nobody to
  delete it, blocking everyone (and us) until the process exits.
- **replace_stale**: a fixed-name EPHEMERAL node held by one of this client's
  earlier sessions (not yet expired on the server) is deleted and ours made.

Size: over the house limit (tests/test_module_sizes.py): the create protocol
is one idea (protected names, the search after a lost reply, the pipelined
list, stale-ephemeral replacement share one retry loop and one ``_Host``), and
its steps are short; splitting it would spread one protocol over files.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
import warnings
from collections.abc import Callable
from typing import NamedTuple, Protocol, TypeVar

from zk_recipes import _paths
from zk_recipes._client.deletes import GuaranteedDeleter
from zk_recipes._client.kazoo import KazooConnection, Pending
from zk_recipes._client.steps import Call, Reply, Steps
from zk_recipes._errors import (
    ConnectionLostError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    OutcomeUnknown,
    SessionLost,
    UnsupportedFeatureError,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes._threads import start_or_defer
from zk_recipes._types import Acl, CreateMode, ZnodeStat

log = logging.getLogger("zk_recipes.client")

T = TypeVar("T")

#: How many times a create re-makes missing parents before giving up (container
#: parents can be reaped by the server between our mkdir and our create).
PARENT_ATTEMPTS = 5

#: A reply that did not come: the request may or may not have been applied.
_UNANSWERED = (ConnectionLostError, ZkTimeoutError, SessionLost)
#: The longest pause between two tries of a protected create's background cleanup.
_CLEANUP_BACKOFF_MAX = 5.0


class CreateResult(NamedTuple):
    """What a create returns: the node's path (relative to the namespace) and its stat."""

    path: str
    stat: ZnodeStat


class _Host(Protocol):
    """What the creator needs from its client."""

    @property
    def namespace(self) -> str: ...
    @property
    def session_id(self) -> int: ...
    @property
    def is_closed(self) -> bool: ...
    @property
    def loss_epoch(self) -> int: ...
    @property
    def _op_timeout(self) -> float: ...
    def _usable(self) -> KazooConnection: ...
    def _abs(self, path: str) -> str: ...
    def _rel(self, path: str) -> str: ...
    def _exists_abs(self, path: str) -> ZnodeStat | None: ...
    def _delete_abs(self, path: str, version: int) -> None: ...
    def _wait_usable(self, timeout: float) -> bool: ...
    def session_epoch(self, session_id: int) -> int | None: ...
    def earlier_sessions(self) -> set[int]: ...
    def retry(self, fn: Callable[[], T], *, timeout: float | None = None) -> T: ...


class Creator:
    """The create protocol of one client (absolute paths in, relative results out)."""

    def __init__(self, client: _Host, deleter: GuaranteedDeleter, session_timeout: float) -> None:
        self._client = client
        self._deleter = deleter
        self._session_timeout = session_timeout
        self._container_fallback = False

    # -- create ----------------------------------------------------------
    def create(
        self,
        full: str,
        data: bytes,
        mode: CreateMode,
        acl: tuple[Acl, ...] | None,
        ttl: float | None,
        *,
        parents: bool,
        protected: bool,
        replace_stale: bool,
        retry: bool,
    ) -> CreateResult:
        client = self._client
        if protected:
            return self.create_protected(full, data, mode, acl, ttl, parents)
        if mode.is_sequential:
            return self._create_sequential(full, data, mode, acl, ttl, parents)
        attempts = 0

        def attempt() -> CreateResult:
            nonlocal attempts
            attempts += 1
            try:
                return self._create_abs(full, data, mode, acl, ttl, parents)
            except NodeExistsError:
                if not mode.is_ephemeral or mode.is_sequential:
                    raise
                stat = client._exists_abs(full)
                if stat is None:
                    raise
                owner = stat.ephemeral_owner
                if attempts > 1 and client.session_epoch(owner) is not None:
                    return CreateResult(client._rel(full), stat)  # ours: the reply was lost
                if replace_stale and owner in client.earlier_sessions():
                    log.info("replacing %s left by our earlier session %#x", full, owner)
                    with contextlib.suppress(NoNodeError):
                        client._delete_abs(full, stat.version)
                    return self._create_abs(full, data, mode, acl, ttl, parents)
                raise

        return client.retry(attempt) if retry else attempt()

    def _create_sequential(
        self,
        full: str,
        data: bytes,
        mode: CreateMode,
        acl: tuple[Acl, ...] | None,
        ttl: float | None,
        parents: bool,
    ) -> CreateResult:
        """A sequential create that is not protected: sent once, never again blindly.

        After a lost reply nothing finds the node (its name was the server's
        to choose), and a resend would make a second one: ``OutcomeUnknown``.
        """
        try:
            return self._create_abs(full, data, mode, acl, ttl, parents)
        except _UNANSWERED as exc:
            raise OutcomeUnknown(
                f"the reply to the sequential create of {self._client._rel(full)} was lost: "
                "the node may or may not have been made, and sending it again could make a "
                "second one. Look before creating again, or create with protected=True (the "
                "node's name then finds it after a lost reply)"
            ) from exc

    def _create_abs(
        self,
        full: str,
        data: bytes,
        mode: CreateMode,
        acl: tuple[Acl, ...] | None,
        ttl: float | None,
        parents: bool,
    ) -> CreateResult:
        client = self._client
        for _ in range(PARENT_ATTEMPTS):
            try:
                created, stat = self.send(full, data, mode, acl, ttl)
                return CreateResult(client._rel(created), stat)
            except NoNodeError:
                parent = _paths.parent_of(full)
                if parent == "/" or not (parents or self._is_namespace_root(parent)):
                    raise NoNodeError(
                        f"cannot create {client._rel(full)}: its parent {client._rel(parent)} "
                        "does not exist (pass parents=True to create it)",
                        client._rel(full),
                    ) from None
                # A container on the way may be reaped between our mkdir and our
                # create; the next round of the loop starts over.
                with contextlib.suppress(NoNodeError):
                    self.ensure(parent)
        raise NoNodeError(f"parents of {client._rel(full)} keep vanishing", client._rel(full))

    def _is_namespace_root(self, full_parent: str) -> bool:
        namespace = self._client.namespace
        return bool(namespace) and full_parent == namespace

    def send(
        self,
        full: str,
        data: bytes,
        mode: CreateMode,
        acl: tuple[Acl, ...] | None,
        ttl: float | None,
    ) -> tuple[str, ZnodeStat]:
        """One create request, with the CONTAINER fallback for servers older than 3.5."""
        conn = self._client._usable()
        timeout = self._client._op_timeout
        if mode is CreateMode.CONTAINER and self._container_fallback:
            mode = CreateMode.PERSISTENT
        try:
            return conn.create_async(full, data, mode, acl, ttl).result(timeout)
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
            warnings.warn(message, RuntimeWarning, stacklevel=5)
            return conn.create_async(full, data, CreateMode.PERSISTENT, acl, ttl).result(timeout)

    # -- parents ---------------------------------------------------------
    def ensure(self, full: str) -> None:
        """Make ``full`` and its missing ancestors exist, as CONTAINER nodes (one attempt)."""
        missing: list[str] = []
        path = full
        while path != "/":
            try:
                self.send(path, b"", CreateMode.CONTAINER, None, None)
                break
            except NodeExistsError:
                break
            except NoNodeError:
                missing.append(path)
                path = _paths.parent_of(path)
            except NoAuthError:
                # No CREATE right here: fine if the node exists already.
                if self._client._exists_abs(path) is None:
                    raise
                break
        for ancestor in reversed(missing):  # top down from the first one missing
            with contextlib.suppress(NodeExistsError):
                self.send(ancestor, b"", CreateMode.CONTAINER, None, None)

    # -- protected create ------------------------------------------------
    def create_protected(
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
        """Create ``<parent>/_c_<uuid>-<name>``, finding our node again after a lost reply.

        ``protected_id``: the prefix of a first attempt the caller already sent.
        """
        client = self._client
        parent = _paths.parent_of(full)
        name = _paths.name_of(full)
        prefixes = [protected_id or _paths.protected_prefix(_paths.new_protected_id())]
        tried = bool(protected_id)

        def attempt() -> CreateResult:
            nonlocal tried
            if tried:
                found = self._ours(parent, prefixes, mode)
                if found is not None:
                    return found
            tried = True
            node = _paths.join(parent, prefixes[-1] + name)
            return self._create_abs(node, data, mode, acl, ttl, parents)

        try:
            return client.retry(attempt)
        except (Exception, KeyboardInterrupt) as exc:
            # NoNode/NodeExists are the server's definite "not created"; after
            # anything else (lost connection, timeout, interrupt) a node of ours
            # may exist, so look for it in the background.
            if tried and not isinstance(exc, (NoNodeError, NodeExistsError)):
                start_or_defer(
                    "zk-recipes protected cleanup",
                    lambda: self._delete_protected(parent, list(prefixes), mode),
                )
            raise

    def _ours(self, parent: str, prefixes: list[str], mode: CreateMode) -> CreateResult | None:
        """Our node among the parent's children, if an earlier attempt made one.

        Dead sessions' matches are deleted, and a fresh prefix is appended to
        ``prefixes`` for the next create (see the module note).
        """
        client = self._client
        stale = False
        ours: list[tuple[ZnodeStat, str]] = []
        for found in self.find(parent, prefixes):
            stat = client._exists_abs(found)
            if stat is None:
                continue
            if not mode.is_ephemeral or client.session_epoch(stat.ephemeral_owner) is not None:
                ours.append((stat, found))
                continue
            # Made by a session that is gone or going (CURATOR-498): not ours to use.
            self._deleter.add(found, -1, stat.ephemeral_owner)
            stale = True
        if ours:
            # One create was answered by several nodes (a retry that a lagging server
            # answered "not there"): the oldest is ours, the rest would be orphans.
            ours.sort(key=lambda pair: pair[0].czxid)
            for stat, extra in ours[1:]:
                log.warning("deleting %s, a second node of one protected create", extra)
                self._deleter.add(extra, -1, stat.ephemeral_owner)
            stat, found = ours[0]
            return CreateResult(client._rel(found), stat)
        if stale:
            prefixes.append(_paths.protected_prefix(_paths.new_protected_id()))
        return None

    def find(self, parent: str, prefixes: list[str]) -> list[str]:
        """Children of ``parent`` with one of ``prefixes``, as the leader has them.

        The sync makes the answering server catch up with the leader first (a
        follower may lag behind a create whose reply we lost); both go in one
        round trip, answered in order.
        """
        client = self._client
        conn = client._usable()
        synced = conn.sync_async(parent)
        listed = conn.get_children_async(parent)
        with contextlib.suppress(NoNodeError):
            synced.result(client._op_timeout)
        try:
            children = listed.result(client._op_timeout)
        except NoNodeError:
            return []
        return [
            _paths.join(parent, child)
            for child in children
            if any(child.startswith(prefix) for prefix in prefixes)
        ]

    def _delete_protected(self, parent: str, prefixes: list[str], mode: CreateMode) -> None:
        """Background: delete what a failed protected create may have left.

        Tried until one synced look succeeds: a long leader election, which the
        session survives, must not leave a committed node of ours behind. An
        ephemeral node goes with its session, so the search ends with it.
        """
        client = self._client
        epoch = client.loss_epoch
        delay = 0.1
        while not client.is_closed and not (mode.is_ephemeral and client.loss_epoch != epoch):
            if client._wait_usable(self._session_timeout):
                try:
                    found = self.find(parent, prefixes)
                except Exception:
                    log.debug("protected cleanup under %s could not list", parent, exc_info=True)
                else:
                    for path in found:
                        self._deleter.add(path, -1, 0)
                    return
            time.sleep(delay)
            delay = min(delay * 2, _CLEANUP_BACKOFF_MAX)

    # -- create + list ---------------------------------------------------
    def create_and_list_steps(
        self,
        full: str,
        data: bytes,
        mode: CreateMode,
        acl: tuple[Acl, ...] | None,
        *,
        protected: bool,
        parents: bool,
        timeout: float | None = None,
    ) -> Steps[tuple[CreateResult, list[str] | None]]:
        """Create and read the parent's children in one round trip (see the module note).

        As steps (_client/steps.py): ``ZkClient.create_and_list`` runs them, the
        asyncio forms await them.

        ``timeout``: the caller's bound (a non-blocking lock attempt). A reply
        not there within it raises ``OperationTimeoutError`` instead of taking
        the slower path that retries until connected; a protected node the
        server may have made all the same is looked for and deleted in the
        background, as after any failed protected create.
        """
        client = self._client
        parent = _paths.parent_of(full)
        name = _paths.name_of(full)
        for attempt in range(PARENT_ATTEMPTS, 0, -1):
            conn = client._usable()
            limit = client._op_timeout
            timeout_now = limit if timeout is None else min(timeout, limit)
            prefix = _paths.protected_prefix(_paths.new_protected_id()) if protected else ""
            node = _paths.join(parent, prefix + name)
            created_pending = conn.create_async(node, data, mode, acl)
            listed_pending = conn.get_children_async(parent)
            try:
                created, stat = yield Reply(created_pending, timeout_now)
            except NoNodeError:
                # The parent is missing: the server's definite "not created", so there
                # is no node of ours to look for. Make the parents, then pipeline again.
                if attempt <= 1 or (not parents and not self._is_namespace_root(parent)):
                    raise NoNodeError(
                        f"cannot create {client._rel(node)}: its parent {client._rel(parent)} "
                        "does not exist"
                        + (" (pass parents=True to create it)" if attempt > 1 else ""),
                        client._rel(node),
                    ) from None
                with contextlib.suppress(NoNodeError, *_UNANSWERED):
                    yield Reply(listed_pending, timeout_now)
                yield Call(functools.partial(client.retry, lambda: self.ensure(parent)))
                continue
            except _UNANSWERED as exc:
                if timeout is not None:
                    # Bounded by the caller: no retrying here. A node of ours may exist.
                    if protected:
                        start_or_defer(
                            "zk-recipes protected cleanup",
                            functools.partial(self._delete_protected, parent, [prefix], mode),
                        )
                    if isinstance(exc, ConnectionLostError | SessionLost):
                        raise
                    raise OperationTimeoutError(
                        f"no answer to the create of {client._rel(node)} within {timeout_now:g}s"
                    ) from exc
                # The reply was lost: the general (slower) path finds a node of ours
                # if the server made one, and retries (never blindly: a sequential node
                # that is not protected cannot be found, OutcomeUnknown).
                if not protected and mode.is_sequential:
                    raise OutcomeUnknown(
                        f"the reply to the create of {client._rel(node)} was lost; it may have "
                        "been made: create with protected=True to find it after a lost reply"
                    ) from exc
                if protected:
                    slow = functools.partial(
                        self.create_protected,
                        full,
                        data,
                        mode,
                        acl,
                        None,
                        parents,
                        protected_id=prefix,
                    )
                else:
                    slow = functools.partial(
                        self.create,
                        full,
                        data,
                        mode,
                        acl,
                        None,
                        parents=parents,
                        protected=False,
                        replace_stale=False,
                        retry=True,
                    )
                result: CreateResult = yield Call(slow)
                listed: list[str] | None = yield Call(
                    functools.partial(self._children_or_none, parent)
                )
                return result, listed
            made = CreateResult(client._rel(created), stat)
            return made, (yield from self._read_or_forget(listed_pending, created, stat))
        raise NoNodeError(f"parents of {client._rel(full)} keep vanishing", client._rel(full))

    def _read_or_forget(
        self, listed: Pending[list[str]], created: str, stat: ZnodeStat
    ) -> Steps[list[str] | None]:
        """The pipelined list, or None; never an exception with our node left behind.

        Any answer but the list (a lost connection, a NoAuth on a parent we may
        create in but not read...) gives None: the caller owns the node and
        reads the queue again, or deletes the node. Anything else (an
        interrupt) deletes the node before it goes on.
        """
        try:
            names: list[str] = yield Reply(listed, self._client._op_timeout)
            return names
        except ZkRecipesError:
            return None
        except BaseException:
            self._deleter.add(created, -1, stat.ephemeral_owner)
            raise

    def _children_or_none(self, parent: str) -> list[str] | None:
        client = self._client
        try:
            return client._usable().get_children_async(parent).result(client._op_timeout)
        except ZkRecipesError:
            return None
