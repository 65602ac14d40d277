"""What a LeaderLatch tells: its close modes, its listeners' protocol, its decisions and statistics.

The values ``latch.py``'s election hands out, apart from the election
itself: ``CloseMode`` (what ``close()`` tells the listeners),
``LeaderLatchListener`` (``is_leader``/``not_leader``),
``LeadershipDecision`` (one term beginning or ending, stamped where the
latch decides: the ``history`` callback's argument) and
``LeaderLatchStatistics`` (``latch.statistics()``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Protocol


class CloseMode(enum.Enum):
    """What ``LeaderLatch.close()`` tells the listeners."""

    #: Listeners are removed first: a leader hears nothing (Curator's default).
    SILENT = "SILENT"
    #: A leader's ``not_leader`` listeners run before its node is deleted.
    NOTIFY_LEADER = "NOTIFY_LEADER"


class LeaderLatchListener(Protocol):
    """What ``LeaderLatch.add_listener`` takes: any object with these two methods.

    Subclass it to implement only one of them (the other does nothing).
    Both run on a thread of the latch, one call at a time, in order.
    """

    def is_leader(self) -> object:
        """This latch became the leader."""
        return None

    def not_leader(self) -> object:
        """This latch stopped being the leader."""
        return None


@dataclasses.dataclass(frozen=True)
class LeadershipDecision:
    """One decision of a LeaderLatch: a term begins or ends (``LeaderLatch(history=...)``).

    Stamped where the latch decides, not when a listener thread gets to it,
    for audit logs and for checkers that compare terms across processes.
    """

    #: True: this latch leads from ``at_ns``; False: it stopped leading then.
    leading: bool
    #: ``time.monotonic_ns()`` of the decision. A term that ended with the
    #: connection ended when the client decided that state (``StateChange.at``).
    at_ns: int
    #: The term's node (our node in the latch directory), when there is one.
    node: str | None
    #: The term's fencing token (its node's czxid), when known.
    token: int | None
    #: Why: "first in line", "closed", "client closed", "LOST", "SUSPENDED",
    #: "session ended", "someone queued ahead of us", or a reset's reason.
    reason: str


#: ``history(decision)``: called at each decision, under the latch's lock: be quick.
History = Callable[[LeadershipDecision], object]


@dataclasses.dataclass(frozen=True)
class LeaderLatchStatistics:
    """A snapshot of one latch (``latch.statistics()``)."""

    #: The election's path, relative to the client's namespace.
    path: str
    #: "latent", "started" or "closed".
    state: str
    #: Leading now (what ``has_leadership()`` says).
    leading: bool
    #: Our node while we have one.
    node: str | None
    #: The token of the current term, or of the last one.
    fencing_token: int | None
    #: Terms led so far.
    terms: int
    #: Times our node was found gone and made again (Curator's reset).
    resets: int
