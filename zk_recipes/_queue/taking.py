"""Taking one queue item: claimed (lock path) or at most once, then consumed, committed or put back.

DistributedQueue's consumer thread lists the items and hands each name to
``Taker.take_claimed`` (or a batch to ``take_at_most_once``); the claim,
the delivery to the consumer, the commit with the item's delete (and the
consumer's own writes), the requeue and the moving aside of a corrupted
node are here. The rules are the queue's
(``distributed.py``'s module note).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from zk_recipes import _metrics, _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.transaction import Transaction
from zk_recipes._errors import (
    BadVersionError,
    ConnectionLostError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    SessionLost,
    TransactionFailedError,
    ZkRecipesError,
)
from zk_recipes._queue.deletes import delete_taken
from zk_recipes._queue.items import CorruptedItemError, QueueSerializer, from_bytes
from zk_recipes._types import CreateMode, Owner

log = logging.getLogger("zk_recipes.queue")

PREFIX = "queue-"
#: Items read and deleted together by a consumer without a lock path.
BATCH = 64
#: The sequence the server appends to every item's name.
SEQUENCE_DIGITS = 10


def requeue_prefix(name: str) -> str:
    """An item put back keeps what its name says (priority, due time, id), with a new sequence.

    Curator keeps only the id queue's id (CURATOR-224): a priority or delay
    item put back by Curator becomes a plain ``queue-`` node.
    """
    return name[:-SEQUENCE_DIGITS] if len(name) > SEQUENCE_DIGITS else PREFIX


@dataclasses.dataclass
class ItemContext:
    """What a consumer gets with an item."""

    #: The item's node.
    path: str
    #: The claim's ``czxid`` (lock path only): higher for every later claim of any item.
    fencing_token: int | None
    #: Set on SUSPENDED or LOST while the consumer runs: its claim may be gone.
    lost: threading.Event
    _transaction: Transaction

    def transaction(self) -> Transaction:
        """Add your ZooKeeper writes here: they commit with the item's delete, or not at all."""
        return self._transaction


Consumer = Callable[[Any, ItemContext], object]


class Taker:
    """Takes items of the queue at ``path`` for ``consumer``."""

    def __init__(
        self,
        client: ZkClient,
        path: str,
        lock_path: str | None,
        consumer: Consumer,
        serializer: QueueSerializer[Any],
    ) -> None:
        self.client = client
        self.path = path
        self.lock_path = lock_path
        self.consumer = consumer
        self.serializer = serializer
        #: The item the consumer is running (lock path: its ``lost`` is set on a loss).
        self.running: ItemContext | None = None

    def take_claimed(self, name: str) -> bool:
        """With a lock path: claim the item ``name`` if nobody has, and hand it to the consumer.

        False when another consumer had it (claimed, or consumed since the listing).
        """
        assert self.lock_path is not None
        return self._process_claimed(
            _paths.join(self.path, name), _paths.join(self.lock_path, name)
        )

    def take_at_most_once(self, names: list[str]) -> int:
        """Without a lock path: read and delete up to ``BATCH`` items pipelined, then deliver.

        The reads go out together, then the deletes (each at the version
        read), then the items whose delete was ours are delivered in order:
        two round trips per batch, not two per item. Returns how many of
        the batch another consumer took first.
        """
        client = self.client
        wait = client.settings.connection_timeout
        items = [_paths.join(self.path, name) for name in names[:BATCH]]
        reads = [(item, client.get_async(item)) for item in items]
        read: list[tuple[str, bytes, int]] = []
        for item, pending in reads:
            try:
                data, stat = pending.result(wait)
            except NoNodeError:
                continue  # taken since the listing
            read.append((item, data, stat.version))
        deletes = [
            (item, data, version, client.delete_async(item, version))
            for item, data, version in read
        ]
        ours: list[tuple[str, bytes]] = []
        for item, data, version, deleting in deletes:
            try:
                deleting.result(wait)
            except (NoNodeError, BadVersionError):
                continue  # another consumer's
            except (ConnectionLostError, OperationTimeoutError, SessionLost):
                if not delete_taken(client, item, version, sent=True):
                    continue
            ours.append((item, data))
        for item, data in ours:
            context = ItemContext(item, None, threading.Event(), client.transaction())
            self._deliver(item, data, context, requeue=False)
            if len(context.transaction()):
                context.transaction().commit()
        return len(items) - len(ours)

    def _process_claimed(self, item: str, claim: str) -> bool:
        client = self.client
        try:
            # Owner JSON, as our locks write: holders() shows who is consuming what.
            made = client.create(
                claim, Owner.here_bytes(), mode=CreateMode.EPHEMERAL, replace_stale=True
            )
        except NodeExistsError:
            return False  # another consumer's claim
        try:
            try:
                data, _stat = client.get(item)
            except NoNodeError:
                return False  # consumed since the listing (or by the claim's previous holder)
            tx = client.transaction().check(claim, version=made.stat.version)
            context = ItemContext(item, made.stat.czxid, threading.Event(), tx)
            self.running = context
            try:
                ok = self._deliver(item, data, context, requeue=True)
            finally:
                self.running = None
            if ok:
                tx.delete(item)
            else:
                tx = client.transaction().check(claim, version=made.stat.version)
                tx.delete(item).create(
                    _paths.join(self.path, requeue_prefix(_paths.name_of(item))),
                    data,
                    mode=CreateMode.PERSISTENT_SEQUENTIAL,
                )
            try:
                tx.commit()
            except (SessionLost, ConnectionLostError) as exc:
                # The session (and the claim) ended before or while the commit went out:
                # either it applied (the item is gone) or nothing did (another runs it).
                context.lost.set()
                _metrics.count("zk_recipes_queue_claims_lost_total", queue=self.path)
                log.warning("queue item %s: the session ended at its commit (%s)", item, exc)
                return True
            except TransactionFailedError as exc:
                if exc.index == 0:  # the claim is gone: the session ended meanwhile
                    context.lost.set()
                    _metrics.count("zk_recipes_queue_claims_lost_total", queue=self.path)
                    log.warning(
                        "queue item %s: its claim was lost while the consumer ran; nothing "
                        "was committed, and another consumer may run it again",
                        item,
                    )
                    return True
                raise
            if not ok:
                _metrics.count("zk_recipes_queue_items_requeued_total", queue=self.path)
            return True
        finally:
            with contextlib.suppress(ZkRecipesError):
                client.delete(claim, guaranteed=True)

    def _deliver(self, item: str, data: bytes, context: ItemContext, *, requeue: bool) -> bool:
        """Call the consumer on each item of the node; False when it raised."""
        consumer = self.consumer
        assert consumer is not None
        try:
            values = [self.serializer.deserialize(b) for b in from_bytes(data)]
        except (CorruptedItemError, ValueError) as exc:
            self._move_aside(item, data, exc)
            return True
        began = time.monotonic()
        try:
            for value in values:
                consumer(value, context)
        except Exception:
            log.exception(
                "the consumer of %s raised on %s: %s",
                self.path,
                item,
                "put back in the queue" if requeue else "the item is gone (no lock path)",
            )
            return False
        finally:  # returned or raised: the time it took
            elapsed = time.monotonic() - began
            _metrics.observe("zk_recipes_queue_consumer_seconds", elapsed, queue=self.path)
        _metrics.count("zk_recipes_queue_items_consumed_total", queue=self.path)
        return True

    def _move_aside(self, item: str, data: bytes, why: Exception) -> None:
        """Copy a node that is no item to ``<path>-corrupted``; the caller then deletes it."""
        aside = _paths.join(self.path + "-corrupted", _paths.name_of(item))
        log.error("queue item %s is not an item (%s): moved aside to %s", item, why, aside)
        with contextlib.suppress(NodeExistsError):  # copied by an earlier try
            self.client.create(aside, data, parents=True)
