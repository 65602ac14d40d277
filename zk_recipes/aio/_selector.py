"""``aio.LeaderSelector``: the leader selector whose term is a coroutine, cancelled for real.

Not a second election: it holds a sync ``LeaderSelector`` (its mutex on the
path, its one thread that queues and requeues, its cancellation rules: a
SUSPENDED or LOST connection by the error policy, our node deleted by
someone, ``close()``), whose ``take_leadership`` hands the term to the loop:
the user's ``async def take_leadership(ctx)`` runs there as a task, and the
selector's thread waits for it, as it waits for a sync term. What asyncio
adds is a cancellation that is not only cooperative: when the sync selector
cancels the term (``ctx.cancelled`` set, ``ctx.reason`` saying why), the
term's task is cancelled too, so the coroutine stops at its next await
(``CancelledError``), its ``finally`` blocks run, and only then is the lock
released and the next candidate may lead. A term holds no thread of the
loop; the selector keeps its one thread, as the sync one does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType

from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import call_step
from zk_recipes._errors import RecipeUsageError, WrongTypeError
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._leader.participants import ErrorPolicy, Participant
from zk_recipes._leader.selector import (
    LeaderSelector as SyncLeaderSelector,
    LeaderSelectorStatistics,
    LeadershipContext,
)
from zk_recipes.aio._drive import run_awaited

log = logging.getLogger("zk_recipes.leader")

#: ``async def take_leadership(ctx)``: one term; return to give leadership up.
TakeLeadership = Callable[[LeadershipContext], Awaitable[object]]


class LeaderSelector:
    """Run ``async def take_leadership(ctx)`` on the loop while this process leads.

    ``aio.LeaderSelector(client, "/election", take_leadership, auto_requeue=True)``,
    then ``async with selector:`` (or ``start()`` and ``await close()``). The
    term is a task on the loop that started the selector; when leadership is
    in question (``ErrorPolicy``: SUSPENDED and LOST, or LOST only; our node
    deleted; ``close()``) the task is cancelled, and the lock is released once
    it has ended. In one election with sync selectors and Curator's
    LeaderSelector (and InterProcessMutex) on the path. See docs/asyncio.md.
    """

    def __init__(
        self,
        client: ZkClient,
        path: str,
        take_leadership: TakeLeadership,
        *,
        identifier: str = "",
        auto_requeue: bool = False,
        error_policy: ErrorPolicy = ErrorPolicy.STANDARD,
    ) -> None:
        if not inspect.iscoroutinefunction(take_leadership):
            raise WrongTypeError(
                "take_leadership must be a coroutine function (async def take_leadership(ctx)); "
                f"got {take_leadership!r}: for a plain function use zk_recipes.LeaderSelector"
            )
        self._take = take_leadership
        self._selector = SyncLeaderSelector(
            client,
            path,
            self._term_on_the_loop,
            identifier=identifier,
            auto_requeue=auto_requeue,
            error_policy=error_policy,
            on_cancel=self._term_cancelled,
        )
        self.client = self._selector.client
        self.path = self._selector.path
        self._loop: asyncio.AbstractEventLoop | None = None
        self._term: concurrent.futures.Future[object] | None = None

    def start(self) -> LeaderSelector:
        """Start competing, in the background; terms run on the calling loop."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            raise RecipeUsageError(f"{self!r} serves the loop it was started on")
        self._loop = loop
        self._selector.start()
        return self

    def requeue(self) -> bool:
        """Compete again after the current term (if any); False if already queued."""
        return self._selector.requeue()

    async def close(self, timeout: float = 10.0) -> None:
        """Stop competing: a running term's task is cancelled, and waited for (on the pool)."""
        await run_awaited(call_step(lambda: self._selector.close(timeout)), Cancellation())

    async def __aenter__(self) -> LeaderSelector:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def has_leadership(self) -> bool:
        """True while a term runs, not cancelled, on a node we hold for sure."""
        return self._selector.has_leadership()

    async def participants(self) -> list[Participant]:
        """Every candidate in line, leader first (read on the pool)."""
        return await run_awaited(call_step(self._selector.participants), Cancellation())

    def statistics(self) -> LeaderSelectorStatistics:
        return self._selector.statistics()

    def __repr__(self) -> str:
        return "<aio." + repr(self._selector)[1:]

    # -- the selector's thread hands each term to the loop --------------------------
    def _term_on_the_loop(self, ctx: LeadershipContext) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            term = asyncio.run_coroutine_threadsafe(self._run_term(ctx), loop)
        except RuntimeError:  # the loop is closed: nobody can lead on it
            log.warning("selector %s: its event loop is closed; leadership given up", self.path)
            return
        self._term = term
        if ctx.cancelled.is_set():  # cancelled before the task existed
            term.cancel()
        with contextlib.suppress(concurrent.futures.CancelledError):
            term.result()  # raised errors are logged by the sync selector

    async def _run_term(self, ctx: LeadershipContext) -> object:
        return await self._take(ctx)

    def _term_cancelled(self, ctx: LeadershipContext) -> None:
        term = self._term
        if term is not None and not term.done():
            term.cancel()  # the task is cancelled on its loop
