"""Queues in ``holders()``: each queue directory's length and the claims of the items in hand.

A queue is recognised by its children's names, as the locks are: item nodes
``queue-…<seq10>`` (DistributedQueue and its priority, delay and id
variants; Curator's the same) or ``qn-<seq10>`` (SimpleQueue). A consumer
with a lock path claims an item with an EPHEMERAL node of the *same name*
in the lock path's directory, so the names alone cannot tell a claims
directory from a queue: the nodes can. Each such directory has its first
item read, and every name it shares with another such directory (the items
in hand, which both hold): an ephemeral node makes it a claims directory,
paired with the queue it shares most names with. Reads: one per directory
plus two per claim, pipelined with the rest of ``holders()``'s, whatever
the queue's length.

The report for a queue (kind ``"queue"``): ``items``, its item nodes (a
``put_multi`` node counts once; items put back by a consumer that raised
included), and as holders its claims (in item order), each with the
claimed item's name as ``identifier``, the claim's ``czxid`` as
``fencing_token`` (the token ``ItemContext.fencing_token`` hands the
consumer) and the owner data our consumers write (Curator writes its IP
address). Queues have no waiters: consumers wait on a watch, not a node.

A claims directory outside the walked path is not seen (``holders(client,
"/jobs")`` with claims under ``/jobs-locks``): its queue is reported
without holders. One whose items are all gone (claims about to be deleted)
pairs with no queue and is left out.

A queue's dead letters (``<path>-dead``, items whose consumer failed
``max_attempts`` times) are counted in its report (``dead``), not reported
as a queue of their own; and each claim says its item's failed attempts so
far, read from the item's node (which is read anyway: it shares the claim's
name).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterable

from zk_recipes import _paths
from zk_recipes._inspect.recipe_holders import QueuedNode, RecipeHolders
from zk_recipes._queue.items import CorruptedItemError, split
from zk_recipes._types import Owner, ZnodeStat

#: The kind ``holders()`` reports for a queue.
QUEUE = "queue"
#: The suffix of a queue's dead letters' directory (``_queue/dead_letters.py``).
DEAD = "-dead"
#: An item's name: Curator's ``queue-`` (plain, priority, delay, id) or ``qn-`` (simple).
_ITEM = re.compile(r"^(?:queue-|qn-).*\d{10}$")


class QueueDirectories:
    """The directories of a walk that hold queue items or claims, before their nodes are read."""

    def __init__(self, listed: dict[str, list[str]]) -> None:
        #: directory -> its item-named children, sorted (the queue's order for plain items).
        self.names = {
            path: sorted(found)
            for path, children in listed.items()
            if (found := [name for name in children if _ITEM.match(name)])
        }
        seen: dict[str, int] = {}
        for names in self.names.values():
            for name in names:
                seen[name] = seen.get(name, 0) + 1
        #: Names under more than one directory: an item and its claim.
        self._shared = {name for name, count in seen.items() if count > 1}

    def node_paths(self) -> list[str]:
        """The nodes to read: each directory's first item, and every shared name."""
        paths: list[str] = []
        for directory, names in self.names.items():
            wanted = [names[0], *(name for name in names[1:] if name in self._shared)]
            paths.extend(_paths.join(directory, name) for name in wanted)
        return paths

    def reports(self, nodes: dict[str, tuple[bytes, ZnodeStat]]) -> Iterable[RecipeHolders]:
        """One ``RecipeHolders`` per queue directory, its claims as holders."""
        queues: list[str] = []
        claims: list[str] = []
        dead: dict[str, int] = {}
        for directory, names in self.names.items():
            if directory.endswith(DEAD):
                dead[directory[: -len(DEAD)]] = len(names)
                continue
            read = [nodes[p] for name in names if (p := _paths.join(directory, name)) in nodes]
            if not read:
                continue  # every node read went meanwhile: nothing to say about it
            (claims if any(stat.ephemeral_owner for _, stat in read) else queues).append(directory)
        queues.extend(path for path in dead if path not in queues)  # empty, but dead letters
        held: dict[str, list[QueuedNode]] = {}
        for directory in claims:
            queue = _paired(directory, queues, self.names)
            if queue is not None:
                held.setdefault(queue, []).extend(self._claims(directory, queue, nodes))
        for queue in sorted(queues):
            found = sorted(held.get(queue, []), key=lambda node: node.identifier or "")
            yield RecipeHolders(
                queue,
                QUEUE,
                tuple(dataclasses.replace(n, position=i) for i, n in enumerate(found)),
                (),
                items=len(self.names.get(queue, [])),
                dead=dead.get(queue, 0),
            )

    def _claims(
        self, directory: str, queue: str, nodes: dict[str, tuple[bytes, ZnodeStat]]
    ) -> Iterable[QueuedNode]:
        items = set(self.names[queue])
        for name in self.names[directory]:
            path = _paths.join(directory, name)
            if name not in items or path not in nodes:
                continue  # its item is gone (consumed): the claim holds nothing now
            raw, stat = nodes[path]
            if not stat.ephemeral_owner:
                continue
            owner = Owner.from_bytes(raw)
            item = nodes.get(_paths.join(queue, name))
            attempts = None
            if item is not None:
                with contextlib.suppress(CorruptedItemError):
                    attempts = split(item[0])[1]
            yield QueuedNode(
                node=path,
                sequence=int(name[-10:]),
                holding=True,
                position=0,
                session_id=stat.ephemeral_owner,
                since=owner.since if owner.since is not None else stat.ctime / 1000.0,
                fencing_token=stat.czxid,
                owner=owner,
                data=None if owner else raw.decode("utf-8", "replace"),
                identifier=name,
                attempts=attempts,
            )


def _paired(claims: str, queues: list[str], names: dict[str, list[str]]) -> str | None:
    """The queue whose items the claims directory ``claims`` shares most names with."""
    mine = set(names[claims])
    best = max(
        queues,
        key=lambda queue: (len(mine.intersection(names.get(queue, []))), queue),
        default=None,
    )
    if best is None or not mine.intersection(names.get(best, [])):
        return None
    return best
