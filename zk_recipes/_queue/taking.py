"""Taking queue items: a claimed take, an at-most-once take, and what a consumer gets with an item.

The steps of consuming one item (or node) live here: the claim and the
transaction that commits the consumer's writes with the item's delete, the
retries and dead letters of a failing item (``retrying.py``), the moving
aside of a corrupted node, and the at-most-once take. The rules are the
queue's (``distributed.py``'s module note).

**As the claim's holder.** Every write made for a claimed item — the commit,
the count of a failed attempt, the move to the dead letters, the claim's
own delete — is bound to the session that made the claim
(``ZkClient.transaction(session=...)``): once that session has ended, the
claim's path may hold the next consumer's claim, at the same version, and a
check of it would pass. Such a write is not sent (``HolderSessionLost``);
the consumer is told its claim was lost and nothing of it applies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from zk_recipes import _metrics, _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.creates import CreateResult
from zk_recipes._client.transaction import Transaction
from zk_recipes._errors import (
    ConnectionLostError,
    HolderSessionLost,
    NodeExistsError,
    NoNodeError,
    SessionLost,
    TransactionFailedError,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes._queue.consuming import refuse_awaitable
from zk_recipes._queue.items import (
    CorruptedItemError,
    QueueSerializer,
    from_bytes,
    split,
    with_trailer,
)
from zk_recipes._queue.retrying import Held, RetryPolicy
from zk_recipes._types import CreateMode, Owner

log = logging.getLogger("zk_recipes.queue")

PREFIX = "queue-"
#: Items read together (pipelined) by a consumer without a lock path.
BATCH = 64
#: A reply that did not come: the request may or may not have been applied.
_UNANSWERED = (ConnectionLostError, ZkTimeoutError, SessionLost)


class _Lost(enum.Enum):
    LOST = "lost"


#: A claim lost while the consumer worked (``Taker._commit``).
LOST = _Lost.LOST


class Outcome(enum.Enum):
    """What a claimed take came to."""

    #: Ours: consumed, set aside, or kept claimed for its next attempt.
    TAKEN = "taken"
    #: Consumed by another consumer since the listing (the directory changed).
    GONE = "gone"
    #: Another consumer's claim is on it.
    CLAIMED = "claimed"


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
    #: Which attempt at the item this is (1 for the first; lock path only counts).
    attempt: int = 1

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
        policy: RetryPolicy | None = None,
        batch: int = 1,
    ) -> None:
        self.client = client
        self.path = path
        self.lock_path = lock_path
        self.consumer = consumer
        self.serializer = serializer
        self.policy = policy or RetryPolicy()
        #: Without a lock path: items deleted together before they are delivered.
        self.batch = batch
        #: The item the consumer is running (lock path: its ``lost`` is set on a loss).
        self.running: ItemContext | None = None
        #: Items kept claimed until their next attempt, by name (``retrying.py``).
        self.held: dict[str, Held] = {}

    # -- with a lock path ------------------------------------------------------
    def take_claimed(self, name: str) -> Outcome:
        """Claim the item ``name`` if nobody has, and hand it to the consumer."""
        assert self.lock_path is not None
        claim = _paths.join(self.lock_path, name)
        made = self._claim(claim)
        if made is None:
            return Outcome.CLAIMED
        stat = made.stat
        held = Held(name, stat.ephemeral_owner, stat.czxid, stat.version, b"", 0)
        try:
            data, _stat = self.client.get(_paths.join(self.path, name))
        except NoNodeError:
            self._release(held)  # consumed since the listing (or by the claim's last holder)
            return Outcome.GONE
        except BaseException:
            self._release(held)
            raise
        try:
            held.body, held.attempts, _error = split(data)
        except CorruptedItemError as exc:
            self._set_aside(held, "-corrupted", data, why=exc)
            return Outcome.TAKEN
        self._attempt(held)
        return Outcome.TAKEN

    def retry_due(self) -> float | None:
        """Try again each held item whose time has come; seconds until the next (None: none)."""
        for held in sorted(self.held.values(), key=lambda h: h.due):
            if held.wait() > 0:
                break
            del self.held[held.name]
            if self.client.session_epoch(held.holder) is None:
                continue  # the claim went with its session: the item is anyone's again
            self._attempt(held)
        return min((h.wait() for h in self.held.values()), default=None)

    def release_held(self) -> None:
        """Let every held item go (at close): its claim deleted, its count kept in the node."""
        held, self.held = list(self.held.values()), {}
        for item in held:
            self._release(item)

    def _claim(self, claim: str) -> CreateResult | None:
        """Our claim on an item, or None when another consumer has it.

        A claim whose reply was lost is ours if it carries our bytes (a token
        of this attempt) and our live session: another consumer thread of
        this same client may have claimed the item meanwhile, on the same
        session (review 3, M6), and its claim is not ours.
        """
        client = self.client
        data = Owner.here_bytes(uuid.uuid4().hex[:12])
        try:
            return client.create(claim, data, mode=CreateMode.EPHEMERAL, retry=False)
        except NodeExistsError:
            return None
        except _UNANSWERED:
            pass

        def look() -> CreateResult | None:
            client.wait_connected(client.settings.connection_timeout)
            try:
                found, stat = client.get(claim)
            except NoNodeError:
                return None  # not made: the next listing claims it again
            ours = found == data and client.session_epoch(stat.ephemeral_owner) is not None
            return CreateResult(claim, stat) if ours else None

        return client.retry(look)

    def _attempt(self, held: Held) -> None:
        """One attempt at a claimed item: the consumer, then its commit or the failure's fate."""
        item = _paths.join(self.path, held.name)
        try:
            values = [self.serializer.deserialize(b) for b in from_bytes(held.body)]
        except (CorruptedItemError, ValueError) as exc:
            self._set_aside(held, "-corrupted", held.body, why=exc)
            return
        try:
            tx = self._holder_transaction(held)
        except HolderSessionLost:
            return  # the claim went with its session before the consumer ran: nobody to tell
        context = ItemContext(item, held.czxid, threading.Event(), tx, held.attempts + 1)
        self.running = context
        try:
            failure = self.deliver(item, values, context)
        finally:
            self.running = None
        if failure is not None:
            self._failed(held, context, failure)
            return
        tx.delete(item).delete(self._claim_path(held))
        refused = self._commit(held, tx, context)
        if refused is None:
            _metrics.count("zk_recipes_queue_items_consumed_total", queue=self.path)
        elif refused is LOST:
            pass
        elif refused.index == len(tx) - 2:
            log.info(
                "queue item %s was deleted while its consumer ran (IdQueue.remove, or by "
                "hand): the consumer's transaction was not committed",
                item,
            )
            self._release(held)
        else:
            self._failed(held, context, refused)  # its own writes were refused: a failed attempt

    def deliver(self, item: str, values: list[Any], context: ItemContext) -> Exception | None:
        """Call the consumer on each item of the node; the exception it raised, if any."""
        consumer = self.consumer
        began = time.monotonic()
        try:
            for value in values:
                refuse_awaitable(consumer(value, context), self.path)
        except Exception as exc:
            return exc
        finally:  # returned or raised: the time it took
            elapsed = time.monotonic() - began
            _metrics.observe("zk_recipes_queue_consumer_seconds", elapsed, queue=self.path)
        return None

    def _failed(self, held: Held, context: ItemContext, failure: Exception) -> None:
        """A failed attempt: count it in the node and try later, or make the item a dead letter."""
        attempts = held.attempts + 1
        error = f"{type(failure).__name__}: {failure}"
        policy = self.policy
        if policy.exhausted(attempts):
            log.error(
                "the consumer of %s failed on %s %d time(s), the last with %s: moved to the "
                "dead letters (%s-dead)",
                self.path,
                context.path,
                attempts,
                error,
                self.path,
                exc_info=failure,
            )
            body = with_trailer(held.body, attempts, error)
            if self._set_aside(held, "-dead", body, context=context):
                _metrics.count("zk_recipes_queue_items_dead_total", queue=self.path)
            return
        delay = policy.delay(attempts)
        log.warning(
            "the consumer of %s failed on %s (attempt %d%s): trying it again in %.1f s",
            self.path,
            context.path,
            attempts,
            "" if policy.max_attempts is None else f" of {policy.max_attempts}",
            delay,
            exc_info=failure,
        )
        try:
            tx = self._holder_transaction(held)
        except HolderSessionLost as exc:
            self._lost(held, context, exc)
            return
        tx.set(context.path, with_trailer(held.body, attempts, error))
        if self._commit(held, tx, context) is not None:
            self._release(held)  # the item went meanwhile (deleted by hand): nothing to retry
            return
        held.attempts = attempts
        held.due = time.monotonic() + delay
        self.held[held.name] = held
        _metrics.count("zk_recipes_queue_items_retried_total", queue=self.path)

    def _set_aside(
        self,
        held: Held,
        suffix: str,
        data: bytes,
        *,
        why: Exception | None = None,
        context: ItemContext | None = None,
    ) -> bool:
        """Move the item to ``<path><suffix>/<name>``: copy it, delete it and its claim, at once.

        ``-corrupted`` for a node that is no item (``why``), ``-dead`` for a dead
        letter. True when it moved.
        """
        item = _paths.join(self.path, held.name)
        aside = _paths.join(self.path + suffix, held.name)
        if why is not None:
            log.error("queue item %s is not an item (%s): moved aside to %s", item, why, aside)
        copy = True
        for _try in range(3):
            try:
                tx = self._holder_transaction(held)
            except HolderSessionLost as exc:
                self._lost(held, context, exc)
                return False
            if copy:
                tx.create(aside, data)
            tx.delete(item).delete(self._claim_path(held))
            refused = self._commit(held, tx, context)
            if refused is None:
                return True
            if refused is LOST:
                return False
            if copy and refused.index == 1 and isinstance(refused.cause, NodeExistsError):
                copy = False  # copied by an earlier try whose reply was lost
                continue
            if copy and refused.index == 1 and isinstance(refused.cause, NoNodeError):
                self.client.retry(lambda: self.client.ensure_path(self.path + suffix))
                continue
            break  # the item went meanwhile
        self._release(held)
        return False

    def _holder_transaction(self, held: Held) -> Transaction:
        """A transaction on the claim's session, its first operation the claim's check."""
        tx = self.client.transaction(session=held.holder)
        return tx.check(self._claim_path(held), held.claim_version)

    def _commit(
        self, held: Held, tx: Transaction, context: ItemContext | None
    ) -> TransactionFailedError | _Lost | None:
        """Commit ``tx``; None when it applied, ``LOST`` when the claim was, else the refusal.

        A claim found lost (its check refused, its session over, or the reply
        lost as the session ended) is told here and counted.
        """
        try:
            tx.commit()
            return None
        except TransactionFailedError as exc:
            if exc.index > 0:
                return exc
            self._lost(held, context, exc)
        except (HolderSessionLost, *_UNANSWERED) as exc:
            self._lost(held, context, exc)
            self._release(held)  # still ours if the reply was lost on a live session
        return LOST

    def _lost(self, held: Held, context: ItemContext | None, why: Exception) -> None:
        """The claim was lost while we worked: nothing was (or may have been) committed."""
        if context is not None:
            context.lost.set()
        _metrics.count("zk_recipes_queue_claims_lost_total", queue=self.path)
        item = _paths.join(self.path, held.name)
        if isinstance(why, (HolderSessionLost, TransactionFailedError)):
            log.warning(
                "queue item %s: its claim was lost while the consumer ran; nothing was "
                "committed, and another consumer may run it again",
                item,
            )
        else:
            log.warning(
                "queue item %s: its claim may be lost: the connection went as its commit was "
                "sent (%s), which applied whole or not at all; if not, another consumer runs "
                "the item again",
                item,
                why,
            )

    def _release(self, held: Held) -> None:
        """Delete our claim (on its session only: after that, the path may be someone else's)."""
        with contextlib.suppress(ZkRecipesError):
            self.client.delete(
                self._claim_path(held), guaranteed=True, session=held.holder, czxid=held.czxid
            )

    def _claim_path(self, held: Held) -> str:
        assert self.lock_path is not None
        return _paths.join(self.lock_path, held.name)
