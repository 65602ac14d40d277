"""A Semaphore's lease and the semaphore's statistics: what ``Semaphore`` hands out.

A ``Lease`` is one node of ours in ``<path>/leases`` held as a hold
(_internals/holding.py: still ours, held for sure, lost), closed by giving
it back to its semaphore (``semaphore.py``), which deletes its node as its
holder.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, final

from zk_recipes._client.client import ZkClient
from zk_recipes._internals.contenders import Entry
from zk_recipes._internals.holding import Hold, is_in_doubt, is_sure, is_valid, taken_now


class _Giver(Protocol):
    """What a lease needs of its Semaphore."""

    client: ZkClient

    def _give_back(self, lease: Lease) -> None: ...


@dataclasses.dataclass(frozen=True)
class SemaphoreStatistics:
    """A snapshot of one Semaphore object (``semaphore.statistics()``)."""

    #: The semaphore's path, relative to the client's namespace.
    path: str
    #: This object's limit (give every process the same one).
    max_leases: int
    #: Leases this object holds now.
    leases: int
    #: Of those, held but not for sure (SUSPENDED, or not verified since).
    in_doubt: int
    #: Of those, lost with their session (not given back yet).
    lost: int
    #: The czxid of each lease held, oldest first.
    fencing_tokens: tuple[int, ...]
    #: Threads inside acquire() on this object.
    waiting: int
    #: Leases acquired by this object so far.
    acquisitions: int
    #: Acquires that got nothing (timed out, non-blocking, cancelled).
    timeouts: int
    #: Leases lost with their session so far.
    losses: int


@dataclasses.dataclass(eq=False)
class _LeaseHold(Hold):
    lease: Lease = dataclasses.field(kw_only=True)


@final
class Lease:
    """One lease of a Semaphore (a node in ``<path>/leases``); ``close()`` gives it back.

    A context manager. ``lost`` turns True when the lease was lost with the
    session, ``in_doubt`` while the connection is SUSPENDED.
    """

    def __init__(self, semaphore: _Giver, entry: Entry, thread: int | None) -> None:
        self._semaphore = semaphore
        self.entry = entry
        seq, in_doubt = taken_now(semaphore.client)
        self._hold = _LeaseHold(entry, seq, in_doubt, lease=self)
        self.closed = False
        #: The thread that took it with ``acquire()`` (None: ``acquire_leases``).
        self._thread = thread

    @property
    def path(self) -> str:
        """The lease node's path (relative to the client's namespace)."""
        return self.entry.path

    @property
    def fencing_token(self) -> int:
        """The lease node's czxid: strictly increasing across the ensemble."""
        return self.entry.czxid

    @property
    def lost(self) -> bool:
        """True once the lease was lost with its session (or its client closed)."""
        return not is_valid(self._semaphore.client, self._hold)

    @property
    def in_doubt(self) -> bool:
        """True while the lease is still ours but not for sure (SUSPENDED)."""
        return is_in_doubt(self._semaphore.client, self._hold)

    def is_held(self) -> bool:
        """True while the lease is ours for sure: not in doubt, not lost (one snapshot)."""
        return is_sure(self._semaphore.client, self._hold)

    def close(self) -> None:
        """Give the lease back (guaranteed delete). Closing twice does nothing."""
        self._semaphore._give_back(self)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = (
            "closed" if self.closed else "LOST" if self.lost else f"held token={self.entry.czxid}"
        )
        return f"<Lease {self.entry.path} {state}>"
