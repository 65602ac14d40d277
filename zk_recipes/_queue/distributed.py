"""DistributedQueue: Curator's queue bytes and names, where no item is lost or silently duplicated.

Znodes (Curator's layout): the queue directory ``<path>`` (made at
``start()``), items ``<path>/queue-<seq10>`` (PERSISTENT_SEQUENTIAL; the
item bytes of ``items.py``; ``put_multi`` puts several items in one node),
and with a lock path the claims ``<lock_path>/<item name>`` (EPHEMERAL, our
owner JSON as our locks write: ``holders()`` shows them; Curator writes its
IP address). A Curator DistributedQueue on the same paths consumes what we
put, and the reverse. Ours add ``<path>-puts`` (the producers' markers),
``<path>-dead`` (dead letters) and ``<path>-corrupted``.

**Putting, exactly once** (``putting.py``): one ``multi`` with a marker of
the producer that answers a lost reply. ``max_items`` bounds the queue as
each producer sees it before it puts: racing producers can each find room,
so the queue may hold up to ``max_items + producers - 1`` nodes (Curator's
bound is as loose).

**Consuming with a lock path** (at-least-once, and told when a duplicate is
possible):

1. claim: create ``<lock_path>/<item>`` EPHEMERAL; a claim whose reply was
   lost is ours when it carries our bytes on our live session (Curator takes
   it for someone else's and skips the item for the session's life);
2. read the item and call ``consumer(value, context)``; ``context`` has the
   claim's fencing token (its ``czxid``), ``lost`` (set on SUSPENDED or LOST
   while the consumer runs: the claim may be gone), ``attempt``, and
   ``transaction()``: the consumer's own writes, committed with the item's
   delete;
3. returned: one transaction {check the claim; the consumer's writes; delete
   the item; delete the claim}, **sent only on the claim's session**
   (``taking.py``): once that session has ended, the next consumer's claim
   may sit at the same path with the same version, so nothing of it is sent.
   The consumer is told (``lost``, a warning, ``zk_recipes_queue_claims_lost_total``);
4. raised (or its writes refused): a failed attempt, counted in the item's
   node; tried again after a back-off, then set aside as a dead letter
   (``retrying.py``);
5. a consumer killed mid-item leaves its claim until its session ends; the
   other consumers watch claims they met when they go idle, so the item is
   taken as soon as the claim goes, on an idle queue too.

**Without a lock path** (Curator's at-most-once, ``at_most_once.py``): read,
delete, then consume; a crash loses at most ``batch`` items (1 by default).

Several consumers of one queue take in order until they race each other,
then spread out (racing.py). A node whose bytes do not parse is moved aside,
to ``<path>-corrupted``, and logged with its path: never dropped.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, overload

from zk_recipes import _metrics, _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import ConnectionState, StateChange
from zk_recipes._client.steps import Reply, Steps, run_blocking
from zk_recipes._errors import (
    ClientStateError,
    ConfigurationError,
    ConnectionLostError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RecipeUsageError,
    SessionLost,
    WrongTypeError,
    ZkTimeoutError,
)
from zk_recipes._internals.args import require_client
from zk_recipes._internals.waits import NewWake, Sleep
from zk_recipes._queue import dead_letters
from zk_recipes._queue.consuming import ClaimWatch, check_consumer
from zk_recipes._queue.items import BYTES, CorruptedItemError, QueueSerializer, from_bytes, to_bytes
from zk_recipes._queue.listing import SizeWarning
from zk_recipes._queue.putting import Putter
from zk_recipes._queue.racing import Pace
from zk_recipes._queue.reporting import report
from zk_recipes._queue.retrying import MAX_HELD, RetryPolicy
from zk_recipes._queue.simple import _StateWake, _Wake
from zk_recipes._queue.taking import PREFIX, ItemContext, Taker

log = logging.getLogger("zk_recipes.queue")

T = TypeVar("T")
_Q = TypeVar("_Q", bound="DistributedQueue[Any]")
Consumer = Callable[[T, ItemContext], object]


class DistributedQueue(Generic[T]):
    """A FIFO of items at ``path``; ``put`` from anywhere, a ``consumer`` thread takes them.

    ``consumer(value, context)`` runs on the queue's own thread. ``lock_path``:
    claim each item first (at-least-once, a failing item tried again, then a
    dead letter: ``max_attempts``, ``retry_backoff``, ``retry_backoff_max``);
    without it, at-most-once, ``batch`` items deleted at a time. ``serializer``
    turns values into item bytes (``BYTES``, ``JSON``); ``max_items`` makes
    ``put`` wait while the queue is full.
    """

    @overload
    def __init__(
        self: DistributedQueue[bytes],
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

    def __init__(
        self,
        client: ZkClient,
        path: str,
        consumer: Consumer[Any] | None = None,
        *,
        lock_path: str | None = None,
        serializer: QueueSerializer[Any] = BYTES,
        max_items: int | None = None,
        max_attempts: int | None = 5,
        retry_backoff: float = 1.0,
        retry_backoff_max: float = 60.0,
        batch: int = 1,
    ) -> None:
        self.client = require_client(client, "DistributedQueue")
        self.path = _paths.validate_path(path, what="the queue's path")
        self.lock_path = (
            None if lock_path is None else _paths.validate_path(lock_path, what="lock_path")
        )
        if consumer is not None:
            check_consumer(consumer)
        if max_items is not None and (isinstance(max_items, bool) or max_items < 1):
            raise ConfigurationError(f"max_items must be None or >= 1, got {max_items!r}")
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 64:
            raise ConfigurationError(f"batch must be an int from 1 to 64, got {batch!r}")
        if batch != 1 and self.lock_path is not None:
            raise ConfigurationError(
                "batch= is for a queue without a lock path (at-most-once): with one, each "
                "item is claimed and committed on its own"
            )
        policy = RetryPolicy(max_attempts, retry_backoff, retry_backoff_max)
        self._taker = (
            None
            if consumer is None
            else Taker(self.client, self.path, self.lock_path, consumer, serializer, policy, batch)
        )
        self._serializer = serializer
        self._max_items = max_items
        self._putter = Putter(self.client, self.path, lambda: self._make_dir(self.path))
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._state_wake = _StateWake(self._wake)
        #: Claims met where this consumer went idle, watched until they go (racing.py).
        self._claim_watch = ClaimWatch(self._wake)
        self._started = False
        self._size_warning = SizeWarning()
        #: Item nodes at this process's last listing (the queue-length gauge); None: not yet.
        self.listed_items: int | None = None

    # -- lifecycle ---------------------------------------------------------
    def start(self: _Q) -> _Q:
        """Make the directories; start the consumer thread (if there is a consumer)."""
        if self._started:
            raise RecipeUsageError(f"the queue {self.path} was started already")
        self._started = True
        # PERSISTENT, as Curator makes them (a container would be reaped when empty).
        self._make_dir(self.path)
        if self.lock_path is not None:
            self._make_dir(self.lock_path)
        self.client.add_listener(self._on_state)
        _metrics.queues.add(self)  # the length gauge, and report()
        if self._taker is not None:
            self._thread = threading.Thread(
                target=self._consume_loop, name=f"zk-recipes queue {self.path}", daemon=True
            )
            self._thread.start()
        return self

    def _make_dir(self, path: str) -> None:
        with contextlib.suppress(NodeExistsError):
            self.client.create(path, parents=True)

    def close(self, timeout: float = 30.0) -> None:
        """Stop consuming: the item in progress is finished first (up to ``timeout``).

        Items waiting for their next attempt are let go (their claims
        deleted; their count of attempts stays in their nodes).
        """
        self._stop.set()
        self._wake.set()
        _metrics.queues.discard(self)
        self.client.remove_listener(self._on_state)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if self._taker is not None and (thread is None or not thread.is_alive()):
            self._taker.release_held()
        self._putter.close()

    def __enter__(self: _Q) -> _Q:
        return self if self._started else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- putting -----------------------------------------------------------
    def put(self, item: T, *, timeout: float | None = None) -> str:
        """Put one item; with ``max_items``, wait up to ``timeout`` while the queue is full."""
        return self.put_multi([item], timeout=timeout)

    def put_multi(self, items: Sequence[T], *, timeout: float | None = None) -> str:
        """Put ``items`` as one node (consumed one by one, in order); returns its path."""
        return self._put_node(items, PREFIX, timeout)

    def _put_node(self, items: Sequence[T], prefix: str, timeout: float | None) -> str:
        data = self._node_bytes(items)
        run_blocking(self._room_steps(timeout))
        return self._send_node(data, prefix)

    def _node_bytes(self, items: Sequence[T]) -> bytes:
        """The node's bytes for ``items``, checked before any wait (the asyncio form's too)."""
        if isinstance(items, (str, bytes, bytearray)) or not isinstance(items, Sequence):
            raise WrongTypeError(
                f"put_multi takes a sequence of items (a list), got {type(items).__name__}"
            )
        return to_bytes([self._serializer.serialize(item) for item in items])

    def _send_node(self, data: bytes, prefix: str) -> str:
        """Put one node (``putting.py``: exactly once on a lost reply); its path."""
        path = self._putter.put(data, prefix)
        _metrics.count("zk_recipes_queue_items_put_total", queue=self.path)
        return path

    # -- what the priority, delay and id queues change ---------------------------
    def _order(self, names: list[str]) -> list[str]:
        """The items in the order they are consumed (plain and priority: by name)."""
        return sorted(names)

    def _ready(self, names: list[str]) -> tuple[list[str], float | None]:
        """The items to consume now, and the seconds until the next one is (None: no wait)."""
        return names, None

    def _room_steps(self, timeout: float | None) -> Steps[None]:
        """With ``max_items``: until the queue has room (a child watch wakes the wait)."""
        if self._max_items is None:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        wake = yield NewWake()
        while True:
            if len((yield from self._names_steps(_Wake(wake)))) < self._max_items:
                return
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise ZkTimeoutError(
                    f"the queue {self.path} held max_items={self._max_items} items for "
                    f"{timeout:g} s: nothing was put"
                )
            yield Sleep(wake, left)  # then cleared: the next look lists again

    # -- dead letters (retrying.py, dead_letters.py) ------------------------------
    def dead_letters(self) -> list[dead_letters.DeadLetter]:
        """Items set aside after ``max_attempts`` failed attempts, oldest first."""
        return dead_letters.dead_letters(self.client, self.path)

    def requeue_dead(self, names: Sequence[str] | None = None) -> int:
        """Put dead letters back into the queue (all, or those ``names``); how many."""
        return dead_letters.requeue(self.client, self.path, names)

    def purge_dead(self, names: Sequence[str] | None = None) -> int:
        """Delete dead letters (all, or those ``names``); how many."""
        return dead_letters.purge(self.client, self.path, names)

    # -- reading without consuming -------------------------------------------
    def __len__(self) -> int:
        """The nodes in the queue (a ``put_multi`` node counts once)."""
        return len(self._names())

    def items(self) -> list[T]:
        """Every item now in the queue, in order, without consuming (corrupted ones skipped)."""
        found: list[T] = []
        for name in self._order(self._names()):
            try:
                data, _stat = self.client.get(_paths.join(self.path, name))
                found.extend(self._serializer.deserialize(b) for b in from_bytes(data))
            except (NoNodeError, CorruptedItemError):
                continue
        return found

    def _names(self, watch: _Wake | None = None) -> list[str]:
        return run_blocking(self._names_steps(watch))

    def _names_steps(self, watch: _Wake | None) -> Steps[list[str]]:
        client = self.client
        limit = client.settings.connection_timeout
        try:
            names = yield Reply(client.get_children_async(self.path, watch=watch), limit)
            self._size_warning.check(self.path, names)
        except NoNodeError:
            # Deleted under us: an exists watch says when a put makes it again.
            if watch is not None:
                there = yield Reply(client.exists_async(self.path, watch=watch), limit)
                if there is not None:
                    return (yield from self._names_steps(watch))
            self.listed_items = 0
            return []
        found = sorted(name for name in names if name.startswith(PREFIX))
        self.listed_items = len(found)
        return found

    @staticmethod
    def report(client: ZkClient) -> list[dict[str, Any]]:
        """The queues this process has open with ``client`` (for status pages: reporting.py)."""
        opened = [q for q in list(_metrics.queues) if isinstance(q, DistributedQueue)]
        return report(client, opened)

    # -- consuming -----------------------------------------------------------
    def _on_state(self, change: StateChange) -> None:
        if change.state in (ConnectionState.SUSPENDED, ConnectionState.LOST):
            running = self._taker.running if self._taker is not None else None
            if running is not None and running.fencing_token is not None:
                running.lost.set()
        self._claim_watch.forget()  # a new connection has none of our one-shot watches
        self._wake.set()  # a reconnect lists again: a dropped watch says nothing

    def _consume_loop(self) -> None:
        watch = _Wake(self._wake)
        taker = self._taker
        assert taker is not None
        pace = Pace(taker, self._stop)  # in order alone, spread out when raced
        while not self._stop.is_set():
            self._wake.clear()
            try:
                retry_in = taker.retry_due() if taker.held else None
                ready, due_in = self._ready(self._order(self._names(watch)))
                if taker.held:
                    ready = [name for name in ready if name not in taker.held]
                if len(taker.held) < MAX_HELD:
                    self._claim_watch.watch(self.client, self.lock_path, pace.take(ready))
                if taker.held:
                    retry_in = min(h.wait() for h in taker.held.values())
                if retry_in is not None:
                    due_in = retry_in if due_in is None else min(due_in, retry_in)
            except (ConnectionLostError, OperationTimeoutError, SessionLost, ClientStateError):
                due_in = None  # looked at again once connected
            except Exception:
                due_in = None
                log.exception("the consumer loop of %s failed on an item; going on", self.path)
            state = self.client.state
            pause = None if state is not None and state.is_connected else 0.2
            if due_in is not None:  # a delayed item or a retry falls due: wake then, or at a change
                pause = due_in if pause is None else min(pause, due_in)
            self._wake.wait(pause)

    def __repr__(self) -> str:  # the priority, delay and id queues' too
        return f"<{type(self).__name__} {self.path}>"
