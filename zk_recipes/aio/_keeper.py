"""Holds still open when ``asyncio.run`` ends are released before the loop closes.

``asyncio.run`` (and ``asyncio.Runner``, uvloop's too) ends by cancelling every
task still pending and running the loop until they finish, then closing the
loop's async generators (``loop.shutdown_asyncgens()``). An ``aio.Lock``
(or a semaphore lease) taken with a bare ``await lock.acquire()`` and never
released would otherwise stay held until its client closes (the node lives
with the session), and every other process would wait for it. So while a
loop has holds open, an async generator of ours is registered with it (the
loop's first-iteration hook): when the run closes it, the tasks that owned
the holds have unwound (an ``async with`` releases its own), and its
``finally`` releases what is still held, deleting each node, before the loop
closes.

Not a task: a task per loop would cost loop passes on every hold (made,
woken, ended) and show among the loop's tasks. The generator is started
when the first hold opens and finished in place when the last one is
released (no await, no loop pass), so a loop with nothing held has nothing
of ours. A loop closed some other way with a hold open (``run_until_complete``
and ``close()`` by hand, no ``shutdown_asyncgens()``) never closes it: the
hold lasts until its client closes, and Python reports the unfinished
generator when it is collected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncGenerator, Iterable
from typing import Any, Protocol

log = logging.getLogger("zk_recipes.aio")


class Keepable(Protocol):
    """A hold the keeper can end: the tasks that own it, and a release for the loop's end."""

    def _owning_tasks(self) -> Iterable[asyncio.Task[Any]]: ...

    async def _end_with_the_loop(self) -> None: ...


class _Keeper:
    """One loop's open holds, and the async generator the loop's end closes."""

    def __init__(self) -> None:
        #: Strong references: a hold must stay reachable until it is released.
        self.held: set[Keepable] = set()
        self._hook = self._at_loop_end()
        # Its first step registers it with the running loop (asyncio's first-iteration
        # hook) and stops at the ``yield``: nothing is scheduled.
        with contextlib.suppress(StopIteration):
            self._hook.asend(None).send(None)

    async def _at_loop_end(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            owners = {t for h in self.held for t in h._owning_tasks() if not t.done()}
            if owners:  # cancelled with the others: each releases what its `async with` holds
                await asyncio.wait(owners)
            for hold in list(self.held):
                with contextlib.suppress(Exception):  # a closed client: the node is gone
                    await hold._end_with_the_loop()

    def finish(self) -> None:
        """Nothing is held: end the generator in place (its ``finally`` has nothing to do)."""
        with contextlib.suppress(StopIteration, RuntimeError):
            self._hook.aclose().send(None)


_keepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Keeper] = (
    weakref.WeakKeyDictionary()
)


def keep(hold: Keepable) -> None:
    """``hold`` is open on the running loop: release it if the loop's tasks end first."""
    loop = asyncio.get_running_loop()
    keeper = _keepers.get(loop)
    if keeper is None:
        keeper = _keepers[loop] = _Keeper()
    keeper.held.add(hold)


def forget(hold: Keepable, loop: asyncio.AbstractEventLoop | None) -> None:
    """``hold`` was released; the last one ends the loop's keeper."""
    if loop is None:
        return
    keeper = _keepers.get(loop)
    if keeper is None:
        return
    keeper.held.discard(hold)
    if not keeper.held:
        del _keepers[loop]
        keeper.finish()
