"""Holds still open when ``asyncio.run`` ends are released before the loop closes.

``asyncio.run`` (and ``asyncio.Runner``, uvloop's too) ends by cancelling every
task still pending and running the loop until they finish. An ``aio.Lock``
(or a semaphore lease) taken with a bare ``await lock.acquire()`` and never released would
otherwise stay held until its client closes (the node lives with the
session), and every other process would wait for it. So while a loop has
holds open, a keeper task waits on that loop; cancelled with the others, it
first lets the tasks that own the holds finish (an ``async with`` releases
its own as it unwinds), then releases what is still held, deleting each
node, before the loop closes.

One keeper per loop, alive only while a hold is open, so a loop with nothing
held has no task of ours. A loop closed some other way with a hold open
(``run_until_complete`` and ``close()`` by hand) does not cancel its tasks:
Python then warns "Task was destroyed but it is pending" naming the keeper,
and the hold lasts until the client closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

log = logging.getLogger("zk_recipes.aio")


class Keepable(Protocol):
    """A hold the keeper can end: the tasks that own it, and a release for the loop's end."""

    def _owning_tasks(self) -> Iterable[asyncio.Task[Any]]: ...

    async def _end_with_the_loop(self) -> None: ...


class _Keeper:
    """One loop's open holds, and the task that releases them when the loop's tasks end."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        #: Strong references: a hold must stay reachable until it is released.
        self.held: set[Keepable] = set()
        self.idle = asyncio.Event()
        self.task = loop.create_task(self._run(), name="zk-recipes: releases holds at loop end")

    async def _run(self) -> None:
        try:
            await self.idle.wait()
        except asyncio.CancelledError:
            owners = {t for h in self.held for t in h._owning_tasks() if not t.done()}
            if owners:  # cancelled too: each releases what its `async with` holds
                await asyncio.wait(owners)
            for hold in list(self.held):
                with contextlib.suppress(Exception):  # a closed client: the node is gone
                    await hold._end_with_the_loop()
            raise


_keepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Keeper] = (
    weakref.WeakKeyDictionary()
)


def keep(hold: Keepable) -> None:
    """``hold`` is open on the running loop: release it if the loop's tasks end first."""
    loop = asyncio.get_running_loop()
    keeper = _keepers.get(loop)
    if keeper is None or keeper.task.done():
        keeper = _keepers[loop] = _Keeper(loop)
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
        keeper.idle.set()
        del _keepers[loop]
