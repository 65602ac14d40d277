"""DelayQueue: Curator's DistributedDelayQueue; an item is consumed once its time has come.

The due time is in the node's name, as Curator writes it: ``queue-|`` + the
epoch milliseconds in upper-case hex (8 digits at least) + ``|`` + the
sequence: ``put(x, delay_until_ms=1700000000000)`` makes
``queue-|18BCFE56800|0000000000``. The time is read from the last two
``|`` (unreadable: due now). The consumer takes the due items in due order
(then FIFO), sleeps until the next one falls due, and wakes early when an
item arrives (it may be due sooner). Never before its time: an item is
taken only once ``now >= due``. An item put back keeps its due time
(Curator's becomes a plain, due-now item).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from zk_recipes._client.client import ZkClient
from zk_recipes._errors import ConfigurationError
from zk_recipes._queue.distributed import Consumer, DistributedQueue
from zk_recipes._queue.items import QueueSerializer
from zk_recipes._queue.taking import PREFIX

T = TypeVar("T")


def due_of(name: str) -> int:
    """The due time (epoch ms) in an item's name; 0 (due now) when there is none."""
    parts = name.rsplit("|", 2)
    if len(parts) != 3:
        return 0
    try:
        return int(parts[1], 16)
    except ValueError:
        return 0


def delay_prefix(delay_until_ms: int) -> str:
    if isinstance(delay_until_ms, bool) or not isinstance(delay_until_ms, int):
        raise ConfigurationError(
            f"delay_until_ms must be an int (epoch milliseconds), got {delay_until_ms!r}"
        )
    if delay_until_ms < 0:
        raise ConfigurationError(f"delay_until_ms must be >= 0, got {delay_until_ms}")
    return f"{PREFIX}|{delay_until_ms:08X}|"


class DelayQueue(DistributedQueue[T]):
    """A DistributedQueue whose items wait until their time (epoch milliseconds)."""

    if TYPE_CHECKING:  # the base's overloads, for this class (mypy binds them to the base)

        @overload
        def __init__(
            self: DelayQueue[bytes],
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
        self, item: T, *, timeout: float | None = None, delay_until_ms: int
    ) -> str:
        """Put one item, to be consumed no earlier than ``delay_until_ms`` (epoch ms)."""
        return self._put_node([item], delay_prefix(delay_until_ms), timeout)

    def put_multi(  # type: ignore[override]
        self, items: Sequence[T], *, timeout: float | None = None, delay_until_ms: int
    ) -> str:
        return self._put_node(items, delay_prefix(delay_until_ms), timeout)

    def _order(self, names: list[str]) -> list[str]:
        return sorted(names, key=lambda name: (due_of(name), name[-10:]))

    def _ready(self, names: list[str]) -> tuple[list[str], float | None]:
        now = int(time.time() * 1000)
        ready = [name for name in names if due_of(name) <= now]
        later = [due_of(name) for name in names if due_of(name) > now]
        return ready, (min(later) - now) / 1000.0 if later else None
