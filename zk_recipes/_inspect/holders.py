"""Holders: who holds and who waits, for every recipe under a path, from the znodes alone.

``holders(client, path)`` needs no recipe object and no cooperation from the
processes it describes: it reads the tree the way a recipe would, and so sees
Java (Curator) contenders beside ours.

Algorithm. Walk the tree breadth-first, each level's ``getChildren`` pipelined
(one round trip per level). A child whose name ends in a sequence number is
not listed: contender nodes (a recipe token, ``lock-``, ``__READ__``,
``__WRIT__``, ``latch-`` or ``lease-``, then the number) are ephemeral and
have no children, and other sequential nodes (queue items) are leaves too; a
subtree this client may not list (NoAuth) is not seen. A
directory is recognised by its children's names (Curator's layouts, ours are
the same):

- ``lock-`` nodes: a mutex. "lock" (Lock, RLock, InterProcessMutex); "leader
  selector" when a node's data is a plain identifier (neither our owner JSON
  nor an IP address: only a LeaderSelector writes that).
- ``__READ__`` / ``__WRIT__`` nodes: "read-write lock".
- ``latch-`` nodes: "leader latch".
- a ``leases`` child (and usually ``locks``): "semaphore".
- ``queue-…`` / ``qn-…`` items: "queue", with its length and the claims of
  the items in hand (queues.py says how claims are told from items).

A face that builds a recipe of its own on one of these registers where its
directories are (``RecipeLayout``, _inspect/layouts.py), and its recipes are
reported under its kind: Celery's singleton tasks as "celery singleton",
its beat election as "celery beat"; the plain nodes a face keeps (base
"node": Celery's queued markers) are reported too, each as its one holder
(nodes.py).

Then every contender node is read (``getData``, pipelined in batches) for its
data and stat, and each queue is ordered and decided by its recipe's own
rules: _internals/contenders.py's sort key, ``rwlock.holding_of`` for a
read-write lock, and a semaphore's pending leases (below). A node gone between the listing and the
read is left out: it is not in the queue any more.

Semaphores. Curator's V2 (and ours) keeps ``max_leases`` in each process,
not in ZooKeeper, so the limit cannot be read. The lease nodes are the
holders, except the ones of the process acquiring now: the head of
``locks/`` creates its lease node(s) while it holds that mutex and waits
until they fit, so lease nodes of the mutex holder's session made after its
mutex node are waiting, with the rest of the mutex queue behind them.

Owner data. Our locks, leases and semaphores write ``Owner`` JSON; a
LeaderLatch or LeaderSelector writes its identifier (which may be owner JSON:
parsed then); a face's layout may read its own data (Celery's beat election
writes ``host:pid``); Curator writes the peer's IP address or nothing. What
is not owner JSON is kept as text in ``QueuedNode.data``, and ``since`` is
then the node's ctime.

Since. A waiter's ``since`` is when it queued. A holder's is when its hold
began where its node records that (``Owner.held_since``: ``zk-recipes lock``
writes it once it holds). A leader's node cannot record it (a change of
its data would end the watch of a Curator LeaderLatch queued behind it),
and nothing in ZooKeeper says when the node ahead of it went: its term began
at its node's creation or later, so ``since`` is that creation, marked
inexact (``since_exact`` False: "leading for at most" that long). Other
holders without the record keep their queue time, as before.

Reads only: no watch is left, no node is created. SUSPENDED/LOST: the reads
fail with the client's error (ConnectionLostError, SessionLost, ...), as any
read does; there is nothing to clean up.

The table for people is holders_table.py's; the layouts faces register are
layouts.py's; the result types are recipe_holders.py's.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._errors import NoAuthError, NoNodeError
from zk_recipes._inspect.layouts import (
    LEADER_LATCH,
    LOCK,
    READ_WRITE_LOCK,
    SEMAPHORE,
    RecipeLayout,
    kind_of,
)
from zk_recipes._inspect.nodes import MarkedNodes
from zk_recipes._inspect.queues import QUEUE, QueueDirectories
from zk_recipes._inspect.recipe_holders import QueuedNode, RecipeHolders
from zk_recipes._internals.args import require_client
from zk_recipes._internals.contenders import sort_key
from zk_recipes._leader.latch import LATCH_TOKEN
from zk_recipes._locks.lock import LOCK_TOKEN
from zk_recipes._locks.rwlock import READ_TOKEN, WRITE_TOKEN, holding_of
from zk_recipes._locks.semaphore import LEASE_TOKEN, LEASES_DIR, LOCKS_DIR
from zk_recipes._types import Owner, ZnodeStat

LEADER_SELECTOR = "leader selector"
#: The kinds the core reports; a face's layouts add their own (``RecipeLayout``).
KINDS = (LOCK, READ_WRITE_LOCK, SEMAPHORE, LEADER_LATCH, LEADER_SELECTOR, QUEUE)

_RW_TOKENS = (READ_TOKEN, WRITE_TOKEN)
_TOKENS = (READ_TOKEN, WRITE_TOKEN, LATCH_TOKEN, LEASE_TOKEN, LOCK_TOKEN)
_CONTENDER = re.compile("(" + "|".join(re.escape(t) for t in _TOKENS) + r")(-?\d{10})$")
_SEQUENTIAL = re.compile(r"\d{10}$")
#: Data that is neither an identifier nor an address: Curator's revocation request.
_REVOKE = b"__REVOKE__"
#: Requests in flight at once (a walk of a large tree does not queue thousands).
_BATCH = 500


def holders(client: ZkClient, path: str = "/") -> list[RecipeHolders]:
    """Every recipe under ``path`` (itself included), sorted by path, with holders and waiters.

    A path that does not exist gives an empty list: recipe directories are
    CONTAINER nodes that the server removes once nobody holds or waits, so
    "no such path" and "nobody there" are one answer. Connection trouble
    raises the client's errors.
    """
    require_client(client, "holders()")
    _paths.validate_path(path)
    listed = _walk(client, path)
    found = list(_recipes(listed))
    queues = QueueDirectories(listed)
    marked = MarkedNodes(listed)
    nodes = _read(
        client,
        [n for recipe in found for n in recipe.node_paths()]
        + queues.node_paths()
        + marked.node_paths(),
    )
    reports = [report for recipe in found if (report := recipe.report(nodes)) is not None]
    reports.extend(queues.reports(nodes))
    reports.extend(marked.reports(nodes))
    return sorted(reports, key=lambda r: (r.path, r.kind))


# -- walking -------------------------------------------------------------------------------

T = TypeVar("T", covariant=True)


class _Request(Protocol[T]):
    """A request in flight (the client's ``*_async`` calls)."""

    def result(self, timeout: float | None = None) -> T: ...


def _gather(
    client: ZkClient,
    requests: Iterable[tuple[str, _Request[T]]],
    skip: tuple[type[Exception], ...] = (NoNodeError,),
) -> list[tuple[str, T]]:
    """Results of pipelined requests; nodes gone meanwhile (``skip``) are left out."""
    timeout = client.settings.connection_timeout
    found: list[tuple[str, T]] = []
    for path, request in requests:
        try:
            found.append((path, request.result(timeout)))
        except skip:
            continue
    return found


def _in_batches(paths: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(paths), _BATCH):
        yield paths[start : start + _BATCH]


def _walk(client: ZkClient, root: str) -> dict[str, list[str]]:
    """The children of every directory under ``root``, contender nodes not descended into."""
    listed: dict[str, list[str]] = {}
    level = [root]
    while level:
        below: list[str] = []
        for batch in _in_batches(level):
            pending = [(p, client.get_children_async(p)) for p in batch]
            for parent, children in _gather(client, pending, (NoNodeError, NoAuthError)):
                listed[parent] = children
                below.extend(
                    _paths.join(parent, name)
                    for name in children
                    if not _SEQUENTIAL.search(name)
                    # ZooKeeper's own subtree, when there is no namespace to hide it
                    and not (parent == "/" and name == "zookeeper" and not client.namespace)
                )
        level = below
    return listed


def _read(client: ZkClient, paths: Sequence[str]) -> dict[str, tuple[bytes, ZnodeStat]]:
    found: dict[str, tuple[bytes, ZnodeStat]] = {}
    for batch in _in_batches(paths):
        found.update(_gather(client, [(p, client.get_async(p)) for p in batch]))
    return found


# -- recognising ---------------------------------------------------------------------------


@dataclasses.dataclass
class _Found:
    """A recipe directory seen in the walk, before its nodes are read."""

    path: str
    family: str  # LOCK, READ_WRITE_LOCK, LEADER_LATCH or SEMAPHORE
    tokens: tuple[str, ...]
    names: list[str]  # contender names (a semaphore's leases)
    leases_dir: str = ""
    mutex: list[str] = dataclasses.field(default_factory=list)  # a semaphore's locks/

    def node_paths(self) -> list[str]:
        where = self.leases_dir or self.path
        paths = [_paths.join(where, n) for n in self.names]
        return paths + [_paths.join(self.path, LOCKS_DIR, n) for n in self.mutex]

    def report(self, nodes: dict[str, tuple[bytes, ZnodeStat]]) -> RecipeHolders | None:
        where = self.leases_dir or self.path
        layout = kind_of(self.family, self.path)
        if self.family == SEMAPHORE:
            return _semaphore(self, nodes, layout)
        queue = _queue(where, self.names, self.tokens, nodes)
        if not queue:
            return None  # every node went while we read: nobody is there now
        base = self.family
        if base == LOCK and layout is None and any(_is_identifier(n.raw) for n in queue):
            base = LEADER_SELECTOR
        if self.family == READ_WRITE_LOCK:
            holding = holding_of([_paths.name_of(n.path) for n in queue])
        else:
            holding = [index == 0 for index in range(len(queue))]
        return _build(self.path, base, layout, queue, holding)


def _recipes(listed: dict[str, list[str]]) -> Iterable[_Found]:
    semaphore_dirs: set[str] = set()
    for path, children in listed.items():
        leases_dir = _paths.join(path, LEASES_DIR)
        if LEASES_DIR in children and leases_dir in listed:
            locks_dir = _paths.join(path, LOCKS_DIR)
            semaphore_dirs.update((leases_dir, locks_dir))
            leases = [n for n in listed[leases_dir] if _token(n) == LEASE_TOKEN]
            mutex = [n for n in listed.get(locks_dir, []) if _token(n) == LOCK_TOKEN]
            yield _Found(path, SEMAPHORE, (LEASE_TOKEN,), leases, leases_dir, mutex)
    for path, children in listed.items():
        if path in semaphore_dirs:
            continue
        by_token: dict[str, list[str]] = {}
        for name in children:
            token = _token(name)
            if token is not None:
                by_token.setdefault(token, []).append(name)
        rw = by_token.get(READ_TOKEN, []) + by_token.get(WRITE_TOKEN, [])
        if rw:
            yield _Found(path, READ_WRITE_LOCK, _RW_TOKENS, rw)
        if LOCK_TOKEN in by_token:
            yield _Found(path, LOCK, (LOCK_TOKEN,), by_token[LOCK_TOKEN])
        if LATCH_TOKEN in by_token:
            yield _Found(path, LEADER_LATCH, (LATCH_TOKEN,), by_token[LATCH_TOKEN])
        if LEASE_TOKEN in by_token:  # the walk started inside a semaphore: <path> is leases/
            parent = _paths.parent_of(path) if _paths.name_of(path) == LEASES_DIR else path
            yield _Found(parent, SEMAPHORE, (LEASE_TOKEN,), by_token[LEASE_TOKEN], path)


def _token(name: str) -> str | None:
    match = _CONTENDER.search(name)
    return match.group(1) if match else None


def _is_identifier(raw: bytes) -> bool:
    """Data only a LeaderSelector writes: text that is neither owner JSON nor an IP address."""
    if not raw or raw == _REVOKE or Owner.from_bytes(raw):
        return False
    text = raw.decode("utf-8", "replace").strip()
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return True
    return False


# -- deciding ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Read:
    """A contender node as read, in queue order."""

    path: str
    key: str
    sequence: int
    stat: ZnodeStat
    raw: bytes
    mode: str | None


def _queue(
    directory: str,
    names: Sequence[str],
    tokens: Sequence[str],
    nodes: dict[str, tuple[bytes, ZnodeStat]],
) -> list[_Read]:
    """The nodes still there, in the recipe's order (Curator's sort key, stable)."""
    queue: list[_Read] = []
    for name in sorted(names, key=lambda n: sort_key(n, tokens)):
        path = _paths.join(directory, name)
        if path not in nodes:
            continue
        raw, stat = nodes[path]
        key = sort_key(name, tokens)
        mode = None
        if tokens == _RW_TOKENS:
            mode = "write" if _token(name) == WRITE_TOKEN else "read"
        queue.append(_Read(path, key, int(key), stat, raw, mode))
    return queue


def _semaphore(
    found: _Found, nodes: dict[str, tuple[bytes, ZnodeStat]], layout: RecipeLayout | None
) -> RecipeHolders | None:
    leases = _queue(found.leases_dir, found.names, (LEASE_TOKEN,), nodes)
    mutex = _queue(_paths.join(found.path, LOCKS_DIR), found.mutex, (LOCK_TOKEN,), nodes)
    if not leases and not mutex:
        return None
    pending: list[_Read] = []
    if mutex:
        head = mutex[0].stat
        pending = [
            n
            for n in leases
            if n.stat.ephemeral_owner == head.ephemeral_owner and n.stat.czxid > head.czxid
        ]
    granted = [n for n in leases if n not in pending]
    waiting = pending + (mutex[1:] if pending else mutex)
    holding = [True] * len(granted) + [False] * len(waiting)
    return _build(found.path, SEMAPHORE, layout, granted + waiting, holding)


def _build(
    path: str,
    base: str,
    layout: RecipeLayout | None,
    queue: Sequence[_Read],
    holding: Sequence[bool],
) -> RecipeHolders:
    built = [
        _queued(node, base, layout, position, held)
        for position, (node, held) in enumerate(zip(queue, holding, strict=True))
    ]
    return RecipeHolders(
        path,
        base if layout is None else layout.kind,
        tuple(n for n in built if n.holding),
        tuple(n for n in built if not n.holding),
    )


def _queued(
    node: _Read, base: str, layout: RecipeLayout | None, position: int, holding: bool
) -> QueuedNode:
    raw, stat = node.raw, node.stat
    owner = Owner.from_bytes(raw)
    data: str | None = None
    identifier = owner.id
    if not owner:
        data = raw.decode("utf-8", "replace")
        if base in (LEADER_LATCH, LEADER_SELECTOR) and data:
            identifier = data  # Curator's Participant id: the node's data
        named = layout.owner_of_data(data) if layout and layout.owner_of_data and data else None
        if named is not None:
            owner = named
    since = owner.since if owner.since is not None else stat.ctime / 1000.0
    exact = True
    if holding and owner.held_since is not None:
        since = owner.held_since
    elif holding and base in (LEADER_LATCH, LEADER_SELECTOR):
        exact = False  # its term began when the node ahead of it went: unknown, not earlier
    return QueuedNode(
        node=node.path,
        sequence=node.sequence,
        holding=holding,
        position=position,
        session_id=stat.ephemeral_owner,
        since=since,
        fencing_token=stat.czxid,
        owner=owner,
        data=data,
        mode=node.mode,
        identifier=identifier,
        since_exact=exact,
    )
