"""LATENT -> STARTED -> CLOSED: the life of every recipe with start() and close().

Written once for LeaderLatch, LeaderSelector, PersistentNode, SharedCount and
the caches, queue consumers and discovery to come: a recipe starts once
(a second ``start()`` is a mistake the message explains), closes once
(``close()`` again does nothing), and cannot start after it closed (make a
new one). The recipe calls these under its own lock.
"""

from __future__ import annotations

import enum

from zk_recipes._errors import RecipeUsageError


class Phase(enum.Enum):
    LATENT = "latent"
    STARTED = "started"
    CLOSED = "closed"


class Lifecycle:
    """The phase of one recipe object; ``what`` names it in messages (its repr)."""

    __slots__ = ("phase",)

    def __init__(self) -> None:
        self.phase = Phase.LATENT

    @property
    def started(self) -> bool:
        return self.phase is Phase.STARTED

    @property
    def closed(self) -> bool:
        return self.phase is Phase.CLOSED

    def begin(self, what: str, *, instead: str = "create a new one") -> None:
        """LATENT -> STARTED, or RecipeUsageError saying what to do ``instead``."""
        if self.phase is Phase.STARTED:
            raise RecipeUsageError(f"{what} is already started: it starts once ({instead})")
        if self.phase is Phase.CLOSED:
            raise RecipeUsageError(f"{what} is already closed: it cannot start again ({instead})")
        self.phase = Phase.STARTED

    def end(self) -> Phase | None:
        """-> CLOSED; the phase it left, or None if it was closed already."""
        if self.phase is Phase.CLOSED:
            return None
        previous, self.phase = self.phase, Phase.CLOSED
        return previous

    def require_started(self, what: str, *, hint: str = "call start() first") -> None:
        """RecipeUsageError unless STARTED."""
        if self.phase is Phase.LATENT:
            raise RecipeUsageError(f"{what} is not started: {hint}")
        if self.phase is Phase.CLOSED:
            raise RecipeUsageError(f"{what} is closed: create a new one")
