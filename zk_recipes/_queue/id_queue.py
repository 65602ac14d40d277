"""IdQueue: Curator's DistributedIdQueue; items carry an id, and ``remove(id)`` takes them out.

The id is in the node's name, as Curator writes it: ``queue-|<id>|`` + the
sequence, with ``/`` and ``|`` in the id replaced by ``_`` (a name holds
neither). Items are consumed FIFO (the id does not order them).
``remove(id)`` applies the same replacement before comparing, so an id with
``/`` or ``|`` is removed (Curator compares the unreplaced id, and such an
item can never be removed). An item put back keeps its id, as in Curator.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._errors import (
    ConfigurationError,
    TransactionFailedError,
    TransactionOutcomeUnknown,
)
from zk_recipes._queue.distributed import Consumer, DistributedQueue
from zk_recipes._queue.items import QueueSerializer
from zk_recipes._queue.taking import PREFIX
from zk_recipes._types import CreateMode

T = TypeVar("T")


def fixed_id(item_id: str) -> str:
    if not isinstance(item_id, str) or not item_id:
        raise ConfigurationError(f"an item id must be a non-empty str, got {item_id!r}")
    return item_id.replace("/", "_").replace("|", "_")


def id_of(name: str) -> str | None:
    """The (replaced) id in an item's name, read from its first two ``|``; None without."""
    parts = name.split("|", 2)
    return parts[1] if len(parts) == 3 else None


class IdQueue(DistributedQueue[T]):
    """A DistributedQueue whose items have ids: ``put(item, item_id=...)``, ``remove(id)``."""

    if TYPE_CHECKING:  # the base's overloads, for this class (mypy binds them to the base)

        @overload
        def __init__(
            self: IdQueue[bytes],
            client: ZkClient,
            path: str,
            consumer: Consumer[bytes] | None = None,
            *,
            lock_path: str | None = None,
            max_items: int | None = None,
            max_attempts: int | None = 5,
            retry_backoff: float = 1.0,
            retry_backoff_max: float = 60.0,
            batch: int = 1,
        ) -> None: ...

        @overload
        def __init__(
            self,
            client: ZkClient,
            path: str,
            consumer: Consumer[T] | None = None,
            *,
            lock_path: str | None = None,
            serializer: QueueSerializer[T],
            max_items: int | None = None,
            max_attempts: int | None = 5,
            retry_backoff: float = 1.0,
            retry_backoff_max: float = 60.0,
            batch: int = 1,
        ) -> None: ...

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    def put(  # type: ignore[override]
        self, item: T, *, timeout: float | None = None, item_id: str
    ) -> str:
        """Put one item under ``item_id``."""
        return self._put_node([item], f"{PREFIX}|{fixed_id(item_id)}|", timeout)

    def put_multi(  # type: ignore[override]
        self, items: Sequence[T], *, timeout: float | None = None, item_id: str
    ) -> str:
        return self._put_node(items, f"{PREFIX}|{fixed_id(item_id)}|", timeout)

    def remove(self, item_id: str) -> int:
        """Delete every item with ``item_id`` not consumed yet; how many were deleted.

        With a lock path, an item a consumer has claimed is left to it (it is
        running: its consumer commits or fails it as usual) and is not counted.
        Each other item goes in one transaction that claims it, deletes it and
        deletes the claim: never under a consumer that took it meanwhile.
        """
        wanted = fixed_id(item_id)
        client = self.client
        removed = 0
        for name in self._names():
            if id_of(name) != wanted:
                continue
            item = _paths.join(self.path, name)
            try:
                self._remove(name)
            except TransactionFailedError:
                continue  # claimed by a consumer (running), or consumed meanwhile
            except TransactionOutcomeUnknown:
                if client.retry(functools.partial(client.exists, item)) is not None:
                    continue  # not applied
            removed += 1
        return removed

    def _remove(self, name: str) -> None:
        """One transaction: claim ``name`` (with a lock path), delete it, delete the claim."""
        tx = self.client.transaction()
        item = _paths.join(self.path, name)
        if self.lock_path is not None:
            claim = _paths.join(self.lock_path, name)
            tx.create(claim, mode=CreateMode.EPHEMERAL).delete(item).delete(claim)
        else:
            tx.delete(item)
        tx.commit(stats=False)

    def _order(self, names: list[str]) -> list[str]:
        return sorted(names, key=lambda name: name[-10:])
