"""``aio.Barrier``: Curator's DistributedBarrier, its wait awaited.

Not a second barrier: ``wait()`` awaits the very steps of the sync
``Barrier.wait`` (_client/steps.py), so a coroutine waiting for the barrier
to come down holds no thread. Putting it up, taking it down and looking
(requests the sync form retries across disconnects) run on the driver's pool.
"""

from __future__ import annotations

from zk_recipes._barriers.barrier import Barrier as SyncBarrier
from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import call_step
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes.aio._drive import run_awaited


class Barrier:
    """A barrier that is up while its node exists; ``Barrier``'s twin for asyncio code.

    ``aio.Barrier(client, "/barriers/deploy")``: ``await set_barrier()``,
    ``await remove_barrier()``, ``await is_set()``, and ``await wait(timeout)``:
    True once the barrier is down, False if it was still up after ``timeout``
    seconds; cancelling it just stops waiting. Sync, asyncio and Java
    DistributedBarrier objects on one path are one barrier.
    """

    def __init__(self, client: ZkClient, path: str, *, data: bytes = b"") -> None:
        self._barrier = SyncBarrier(client, path, data=data)
        self.client = self._barrier.client
        self.path = self._barrier.path

    async def set_barrier(self) -> None:
        """Put the barrier up (already up is fine)."""
        await run_awaited(call_step(self._barrier.set_barrier), Cancellation())

    async def remove_barrier(self) -> None:
        """Take the barrier down, releasing every waiter (already down is fine)."""
        await run_awaited(call_step(self._barrier.remove_barrier), Cancellation())

    async def is_set(self) -> bool:
        """True while the barrier is up."""
        return await run_awaited(call_step(self._barrier.is_set), Cancellation())

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until the barrier is down; False if it was still up after ``timeout`` s."""
        return await run_awaited(self._barrier.wait_steps(timeout), None)

    def __repr__(self) -> str:
        return f"<aio.Barrier {self.path}>"
