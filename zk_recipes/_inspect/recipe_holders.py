"""What ``holders()`` reports: each recipe found, its holders and its waiters, in order.

The two result types, apart from the walk that fills them (holders.py) so
that each way of recognising a recipe (queues.py: queue directories and
their claims) builds them without importing the walk.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from zk_recipes._types import Owner


@dataclasses.dataclass(frozen=True)
class QueuedNode:
    """One contender node of a recipe: a holder or a waiter (a queue's claim: a holder)."""

    #: The node's full path, relative to the client's namespace.
    node: str
    #: Its sequence number (the ``%010d`` suffix).
    sequence: int
    #: True while it holds (the lock, a lease, leadership).
    holding: bool
    #: Its place in the recipe's queue, 0-based: holders first, then waiters in order.
    position: int
    #: The session that owns it (the node's ephemeralOwner).
    session_id: int
    #: When it was queued, epoch seconds: the owner's ``since``, else the node's ctime; for a
    #: holder whose node records it, when its hold began (see the module docstring).
    since: float
    #: The node's czxid: the fencing token our recipes hand out.
    fencing_token: int
    #: The owner data in the node (empty when the data is not ours).
    owner: Owner
    #: The node's data as text when it is not our owner JSON (Curator: an IP address or "").
    data: str | None
    #: A read-write lock's half: "read" or "write"; None for other recipes.
    mode: str | None = None
    #: The owner's id (a Celery task id), an election candidate's identifier, or the
    #: name of the item a queue claim holds.
    identifier: str | None = None
    #: False when ``since`` only bounds the start of a leader's term (it began then or later).
    since_exact: bool = True
    #: A queue claim's item: its failed attempts so far (from the item's node); else None.
    attempts: int | None = None

    def age(self, now: float | None = None) -> str:
        """How long ago ``since`` was, for people: ``12s``, ``3m``, ``5h``, ``2d``.

        Counted to ``now`` (epoch seconds, default: now); a clock behind
        ours reads as 0s. An inexact ``since`` reads as a bound: ``≤12s``.
        """
        whole = max(0, int((time.time() if now is None else now) - self.since))
        bound = "" if self.since_exact else "≤"
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if whole >= size:
                return f"{bound}{whole // size}{unit}"
        return f"{bound}{whole}s"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the fields, the owner flattened (see docs/operations.md)."""
        owner = self.owner
        return {
            "node": self.node,
            "sequence": self.sequence,
            "holding": self.holding,
            "position": self.position,
            "mode": self.mode,
            "host": owner.host,
            "pid": owner.pid,
            "thread": owner.thread,
            "id": self.identifier,
            "since": self.since,
            "since_exact": self.since_exact,
            "command_pid": owner.command_pid,
            "command_pgid": owner.command_pgid,
            "fencing_token": self.fencing_token,
            "session_id": self.session_id,
            "session_id_hex": f"{self.session_id:#x}",
            "data": self.data,
            "attempts": self.attempts,
        }


@dataclasses.dataclass(frozen=True)
class RecipeHolders:
    """Who holds one recipe and who waits for it, in the recipe's order."""

    #: The recipe's path, relative to the client's namespace.
    path: str
    #: "lock", "read-write lock", "semaphore", "leader latch", "leader selector",
    #: or the kind of a face's layout ("celery singleton", "celery beat").
    kind: str
    #: The node(s) holding now (a leader, a lock holder, readers, leases).
    holders: tuple[QueuedNode, ...]
    #: The nodes waiting, first in line first.
    waiting: tuple[QueuedNode, ...]
    #: A queue's length (its item nodes; a ``put_multi`` node counts once); None for others.
    items: int | None = None
    #: A queue's dead letters (under ``<path>-dead``); None for others.
    dead: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{"path", "kind", "items", "dead", "holders": [...], "waiting": [...]}``."""
        return {
            "path": self.path,
            "kind": self.kind,
            "items": self.items,
            "dead": self.dead,
            "holders": [n.as_dict() for n in self.holders],
            "waiting": [n.as_dict() for n in self.waiting],
        }
