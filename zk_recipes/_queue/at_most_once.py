"""Taking without a lock path (Curator's at-most-once): read, delete, then deliver.

Reads go out pipelined (up to ``BATCH``), then ``batch`` items at a time (1
by default) are deleted, each at the version read, and those whose delete
was ours are delivered: a consumer killed meanwhile loses at most those
``batch`` items (review 3, Q3: it lost up to 64 before). A delete whose
reply was lost and whose retry finds NoNode delivers the item anyway
(``deletes.py``). A consumer that raises has lost the item, as in Curator.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from zk_recipes import _metrics, _paths
from zk_recipes._errors import (
    BadVersionError,
    ConnectionLostError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    SessionLost,
)
from zk_recipes._queue.deletes import delete_taken
from zk_recipes._queue.items import CorruptedItemError, from_bytes
from zk_recipes._queue.taking import BATCH, ItemContext, Taker

log = logging.getLogger("zk_recipes.queue")


def take_at_most_once(taker: Taker, names: list[str]) -> int:
    """Without a lock path: read up to ``BATCH`` items pipelined; delete, then deliver.

    The reads go out together. Then ``batch`` items at a time (1 by
    default) are deleted, each at the version read, and the ones whose
    delete was ours are delivered: a consumer killed meanwhile loses at
    most those ``batch`` items. Returns how many another consumer took
    first.
    """
    client = taker.client
    wait = client.settings.connection_timeout
    items = [_paths.join(taker.path, name) for name in names[:BATCH]]
    reads = [(item, client.get_async(item)) for item in items]
    read: list[tuple[str, bytes, int]] = []
    for item, pending in reads:
        try:
            data, stat = pending.result(wait)
        except NoNodeError:
            continue  # taken since the listing
        read.append((item, data, stat.version))
    ours = 0
    for start in range(0, len(read), taker.batch):
        chunk = read[start : start + taker.batch]
        deletes = [(item, data, v, client.delete_async(item, v)) for item, data, v in chunk]
        taken: list[tuple[str, bytes]] = []
        for item, data, version, deleting in deletes:
            try:
                deleting.result(wait)
            except (NoNodeError, BadVersionError):
                continue  # another consumer's
            except (ConnectionLostError, OperationTimeoutError, SessionLost):
                if not delete_taken(client, item, version, sent=True):
                    continue
            taken.append((item, data))
        for item, data in taken:
            _deliver_taken(taker, item, data)
        ours += len(taken)
    return len(items) - ours


def _deliver_taken(taker: Taker, item: str, data: bytes) -> None:
    """Deliver an item already deleted (at-most-once): a failure loses it, as in Curator."""
    client = taker.client
    try:
        values = [taker.serializer.deserialize(b) for b in from_bytes(data)]
    except (CorruptedItemError, ValueError) as exc:
        aside = _paths.join(taker.path + "-corrupted", _paths.name_of(item))
        log.error("queue item %s is not an item (%s): moved aside to %s", item, exc, aside)
        with contextlib.suppress(NodeExistsError):  # copied by an earlier try
            client.create(aside, data, parents=True)
        return
    context = ItemContext(item, None, threading.Event(), client.transaction())
    failure = taker.deliver(item, values, context)
    if failure is not None:
        log.error(
            "the consumer of %s raised on %s: the item is gone (no lock path)",
            taker.path,
            item,
            exc_info=failure,
        )
        return
    _metrics.count("zk_recipes_queue_items_consumed_total", queue=taker.path)
    if len(context.transaction()):
        context.transaction().commit()
