"""``aio.LeaderLatch``: the LeaderLatch recipe with its waits awaited.

Not a second election: it holds a sync ``LeaderLatch`` (its node, its one
thread that follows the queue, its listeners) and awaits the very steps of
its ``await_leadership`` (_client/steps.py) with the asyncio driver, so a
coroutine waiting to lead holds no thread. ``close()`` (a delete, a thread to
join) runs on the driver's pool.
"""

from __future__ import annotations

import functools
from types import TracebackType

from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import call_step
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._leader.latch import LeaderLatch as SyncLeaderLatch
from zk_recipes._leader.latch_values import CloseMode, LeaderLatchListener, LeaderLatchStatistics
from zk_recipes._leader.participants import ErrorPolicy, Participant
from zk_recipes.aio._drive import run_awaited


class LeaderLatch:
    """Curator's LeaderLatch for asyncio code; ``LeaderLatch``'s twin, in one election with it.

    ``aio.LeaderLatch(client, "/election", identifier="")``: ``async with latch:``
    joins (and leaves at the end), ``await latch.await_leadership(timeout)``
    waits to lead, holding no thread (False on timeout, or once the latch or
    client is closed; cancelling it just stops waiting). ``has_leadership()``,
    ``fencing_token``, ``node``, ``statistics()`` and ``add_listener`` are the
    sync latch's, never blocking. See docs/asyncio.md.
    """

    def __init__(
        self,
        client: ZkClient,
        path: str,
        identifier: str = "",
        *,
        error_policy: ErrorPolicy = ErrorPolicy.STANDARD,
    ) -> None:
        self._latch = SyncLeaderLatch(client, path, identifier, error_policy=error_policy)
        self.client = self._latch.client
        self.path = self._latch.path

    def start(self) -> LeaderLatch:
        """Join the election (in the background: it never blocks)."""
        self._latch.start()
        return self

    async def close(self, mode: CloseMode = CloseMode.SILENT) -> None:
        """Leave the election (our node deleted, the latch's thread joined, on the pool)."""
        steps = call_step(functools.partial(self._latch.close, mode))
        await run_awaited(steps, Cancellation())

    async def __aenter__(self) -> LeaderLatch:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def await_leadership(self, timeout: float | None = None) -> bool:
        """Wait until this latch leads; False on timeout, or if the latch or client is closed."""
        return await run_awaited(self._latch.await_leadership_steps(timeout), None)

    def has_leadership(self) -> bool:
        """True while this latch leads for sure (see ``ErrorPolicy`` for SUSPENDED)."""
        return self._latch.has_leadership()

    @property
    def fencing_token(self) -> int:
        """The czxid of the node of our current (or last) term."""
        return self._latch.fencing_token

    @property
    def node(self) -> str | None:
        """Path of our node (None before it is created, and after close)."""
        return self._latch.node

    def add_listener(self, listener: LeaderLatchListener) -> None:
        """``is_leader()`` / ``not_leader()`` on each change, on a latch thread (as in sync)."""
        self._latch.add_listener(listener)

    async def participants(self) -> list[Participant]:
        """Every candidate in line, leader first (read on the pool)."""
        return await run_awaited(call_step(self._latch.participants), Cancellation())

    def statistics(self) -> LeaderLatchStatistics:
        return self._latch.statistics()

    def __repr__(self) -> str:
        return "<aio." + repr(self._latch)[1:]
