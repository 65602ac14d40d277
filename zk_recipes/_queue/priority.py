"""PriorityQueue: Curator's DistributedPriorityQueue; smaller priority first, FIFO within one.

The priority is in the node's name, as Curator writes it: ``queue-`` + ``1``
for a priority >= 0 (``0`` below) + the priority as 8 upper-case hex digits
of its 32-bit two's complement + the sequence: ``put(x, priority=5)`` makes
``queue-1000000050000000000``, priority -1 ``queue-0FFFFFFFF0000000001``.
Names sort as strings, so the consumer takes the smallest priority first.
An item put back after its consumer raised keeps its priority (Curator's
becomes a plain ``queue-`` node, which sorts before every priority >= 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from zk_recipes._client.client import ZkClient
from zk_recipes._errors import ConfigurationError
from zk_recipes._queue.distributed import Consumer, DistributedQueue
from zk_recipes._queue.items import QueueSerializer
from zk_recipes._queue.taking import PREFIX

T = TypeVar("T")


def priority_prefix(priority: int) -> str:
    """The name prefix of an item of ``priority`` (a 32-bit int)."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ConfigurationError(f"priority must be an int, got {priority!r}")
    if not -(2**31) <= priority < 2**31:
        raise ConfigurationError(f"priority must fit in 32 bits (Java's int), got {priority}")
    return f"{PREFIX}{'1' if priority >= 0 else '0'}{priority & 0xFFFFFFFF:08X}"


class PriorityQueue(DistributedQueue[T]):
    """A DistributedQueue whose ``put`` takes a priority (smaller first)."""

    if TYPE_CHECKING:  # the base's overloads, for this class (mypy binds them to the base)

        @overload
        def __init__(
            self: PriorityQueue[bytes],
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

    def put(self, item: T, *, timeout: float | None = None, priority: int = 0) -> str:
        """Put one item at ``priority``."""
        return self._put_node([item], priority_prefix(priority), timeout)

    def put_multi(
        self, items: Sequence[T], *, timeout: float | None = None, priority: int = 0
    ) -> str:
        """Put ``items`` as one node at ``priority``."""
        return self._put_node(items, priority_prefix(priority), timeout)
