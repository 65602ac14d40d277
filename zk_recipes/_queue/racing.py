"""How a consumer takes what it listed: strictly in order alone, spread out when others race it.

Consumers that all take from the head of one queue collide on every item: a
wasted claim, read or delete each time (with 4 consumers, 7 requests per
item without a lock path and 11 with one, where 2 and 4 would do). A
``Pace`` watches for the sign of a race, an item another consumer took
first, and then:

- takes a short run (``RUN_CLAIMED`` or ``RUN_AT_MOST_ONCE`` items, fewer
  when the queue is short) starting at a random one of the first
  ``SPREAD``, in order, and lists again; until ``CONTENDED_PASSES`` passes
  in a row lost nothing;
- without a lock path, reads one item at a time while racing (an item read
  ahead is one another consumer may take first: a wasted read, and often a
  wasted delete); alone, it pipelines its reads in batches that start at
  ``FIRST_BATCH`` items and double up to ``BATCH`` while it loses none, so
  that consumers that start together collide on a few items, not on 64
  each. With 4 producers and 4 consumers: 3.2 requests per item, the put,
  the read and the delete included (3.6 with the reads ahead).

A lone consumer never loses an item, and so takes strictly in order. With
several, an item can be passed over by at most ``SPREAD`` later ones (a
priority queue's order holds to that much; across consumers there was
never an order).

What a loss means depends on how it was lost. An item consumed by another
since the listing (gone) means the listing is stale: the pass ends, and the
directory's change, which wakes the consumer, lists again. An item claimed by
another consumer (claimed) says nothing about the others: the pass goes on to
the next item, so an item in another consumer's hands for long holds up no
other. A pass that took nothing and found items claimed returns them: the
queue then watches those claims (``DistributedQueue``), since a claimant that
dies lets its claim go with its session without any change to the queue's
directory (review 3, Q2).
"""

from __future__ import annotations

import random
import threading

from zk_recipes._queue.at_most_once import take_at_most_once
from zk_recipes._queue.taking import BATCH, Outcome, Taker

#: The head items racing consumers spread over.
SPREAD = 64
#: The run a racing consumer takes at once: with a lock path, and without.
RUN_CLAIMED = 4
RUN_AT_MOST_ONCE = 16
#: The first batch of a consumer without a lock path, doubled up to BATCH while it loses none.
FIRST_BATCH = 4
#: Passes without a loss before a consumer takes from the head, in order, again.
CONTENDED_PASSES = 8


class Pace:
    """One consumer's way through its listings (see the module note)."""

    def __init__(self, taker: Taker, stop: threading.Event) -> None:
        self._taker = taker
        self._stop = stop
        self._claimed = taker.lock_path is not None
        self._random = random.Random()
        self._batch = FIRST_BATCH
        self._contended = 0  # passes left taking runs: others take here too

    def take(self, ready: list[str]) -> list[str]:
        """Take from ``ready`` (the items to consume now, in the queue's order).

        Returns the items found claimed by others when the pass took nothing
        and the listing is not stale (the claims to watch); else [].
        """
        if self._claimed:
            taken, gone, claimed = self._take_claimed(ready)
            lost = gone or bool(claimed)
        else:
            lost = self._take_at_most_once(self._run(ready) if self._contended else ready)
            taken, gone, claimed = True, lost, []
        self._contended = CONTENDED_PASSES if lost else max(0, self._contended - 1)
        return claimed if not taken and not gone else []

    def _run(self, ready: list[str]) -> list[str]:
        # A short queue: shorter runs, so that a few racing consumers take different items.
        run = max(1, min(RUN_AT_MOST_ONCE, len(ready) // 4))
        start = self._random.randrange(min(len(ready), SPREAD)) if ready else 0
        return ready[start : start + run]

    def _take_at_most_once(self, ready: list[str]) -> bool:
        while ready and not self._stop.is_set():
            size = 1 if self._contended else self._batch  # racing: no read ahead
            if take_at_most_once(self._taker, ready[:size]):  # a batch, pipelined
                self._batch = FIRST_BATCH
                return True
            self._batch = min(BATCH, size * 2)
            ready = ready[size:]
        return False

    def _take_claimed(self, ready: list[str]) -> tuple[bool, bool, list[str]]:
        """(took any, met an item gone, the items found claimed by others)."""
        limit = None
        if self._contended and ready:
            # Racing: a short run from a random one of the first SPREAD, the rest after.
            limit = max(1, min(RUN_CLAIMED, len(ready) // 4))
            start = self._random.randrange(min(len(ready), SPREAD))
            ready = ready[start:] + ready[:start]
        taken = 0
        claimed: list[str] = []
        for name in ready:
            if self._stop.is_set():
                break
            outcome = self._taker.take_claimed(name)
            if outcome is Outcome.GONE:
                return bool(taken), True, claimed
            if outcome is Outcome.CLAIMED:
                claimed.append(name)
                continue
            taken += 1
            if limit is not None and taken >= limit:
                break
        return bool(taken), False, claimed
