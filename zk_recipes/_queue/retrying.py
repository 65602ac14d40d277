"""A consumer that fails: its item is tried again after a back-off, then set aside as a dead letter.

A consumer that raises (or whose transaction the server refuses) has failed
one *attempt* at the item. Putting the item straight back, as Curator's
REQUEUE does, makes a poison item spin: tried again at once, forever, a
traceback and several writes each time (over a thousand a second on an idle
queue). Here, with a lock path:

- the attempt is counted **in the item's node** (a trailer after Curator's
  end byte, ``items.py``: a Curator consumer reads the same items), written
  with the claim checked and bound to the claim's session, so the count
  survives the consumer: another consumer, after a kill -9, goes on from it;
- the consumer keeps the claim and tries the item again after a back-off
  (``retry_backoff`` seconds doubled per attempt up to ``retry_backoff_max``,
  jittered per item), taking other items meanwhile: no thread sleeps, no
  request is sent while it waits, and other consumers leave the claimed item
  alone (they are told when the claim goes);
- after ``max_attempts`` failed attempts the item is moved, in one
  transaction with the claim checked, to ``<path>-dead/<item name>`` (the
  sibling of ``<path>-corrupted``) with the count and the last error in its
  trailer: ``DistributedQueue.dead_letters()``, ``requeue_dead()`` and
  ``purge_dead()``, or ``zk-recipes queue dead ...``, list, put back and drop
  them. ``max_attempts=None`` tries for ever, with the back-off.

Without a lock path an item is deleted before it is delivered
(at-most-once): a consumer that raises has lost it, as in Curator.
"""

from __future__ import annotations

import dataclasses
import random
import time

from zk_recipes._errors import ConfigurationError

#: Items one consumer keeps claimed while they wait for their next attempt; past it, it
#: takes no new item until one is done (every item failing: a database down, say).
MAX_HELD = 64


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How often, and how far apart, a failing item is tried (the module note)."""

    max_attempts: int | None = 5
    backoff: float = 1.0
    backoff_max: float = 60.0

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if attempts is not None and (
            isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1
        ):
            raise ConfigurationError(
                f"max_attempts must be None (for ever) or an int >= 1, got {attempts!r}"
            )
        for name in ("backoff", "backoff_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigurationError(f"retry_{name} must be seconds >= 0, got {value!r}")
        if self.backoff_max < self.backoff:
            raise ConfigurationError(
                f"retry_backoff_max ({self.backoff_max:g}) must be >= retry_backoff "
                f"({self.backoff:g})"
            )

    def exhausted(self, attempts: int) -> bool:
        """Whether an item that failed ``attempts`` times is a dead letter."""
        return self.max_attempts is not None and attempts >= self.max_attempts

    def delay(self, attempts: int) -> float:
        """Seconds before the attempt after the ``attempts``-th failed one: doubled, jittered."""
        full = min(self.backoff_max, self.backoff * 2.0 ** min(attempts - 1, 30))
        return full / 2 + random.uniform(0.0, full / 2)


@dataclasses.dataclass
class Held:
    """An item this consumer keeps claimed until its next attempt."""

    name: str
    #: The claim's session (its ``ephemeral_owner``), czxid and version.
    holder: int
    czxid: int
    claim_version: int
    #: The node's items (no trailer), and the failed attempts so far.
    body: bytes
    attempts: int
    #: ``time.monotonic()`` of the next attempt.
    due: float = 0.0

    def wait(self) -> float:
        return max(0.0, self.due - time.monotonic())
