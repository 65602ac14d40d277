"""A sync call made on a thread that runs an asyncio loop: told in the loop's debug mode.

Why: a sync call (``zk.get()``, ``Lock.acquire()``) from a coroutine blocks
the whole event loop until its answer comes, a round trip or a whole wait
for a lock. It works, so nothing is raised; but asyncio's debug mode is
where users look for that kind of mistake, so there it is named with the
way out (``zk_recipes.aio``, or ``asyncio.to_thread``). The check costs one
C call per blocking call outside a loop.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable

_running_loop = asyncio._get_running_loop  # the low-level, non-raising form


def warn_if_on_loop(what: Callable[[], str]) -> None:
    """Warn (RuntimeWarning) when called on a loop's thread and that loop is in debug mode.

    ``what()`` names the call; it is only made when there is something to say
    (every sync request passes here: no message is built for nothing).
    """
    loop = _running_loop()
    if loop is not None and loop.get_debug():
        warnings.warn(
            f"{what()} blocks the running asyncio event loop until it returns: await the "
            "asyncio form instead (zk_recipes.aio, docs/asyncio.md: aio.Lock, zk.aio.get, ...) "
            "or run it with asyncio.to_thread",
            RuntimeWarning,
            stacklevel=3,
        )
