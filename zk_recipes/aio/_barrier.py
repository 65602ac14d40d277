"""``aio.Barrier`` and ``aio.DoubleBarrier``: Curator's barriers, their waits awaited.

Not second barriers: ``Barrier.wait()`` and ``DoubleBarrier.enter()`` /
``leave()`` await the very steps of the sync forms (_client/steps.py), so a
coroutine waiting at a barrier holds no thread. Putting a barrier up, taking
it down, looking, and the double barrier's rare bounded calls (making our
member node, raising ``ready``, deleting our node) run on the driver's pool.
"""

from __future__ import annotations

from types import TracebackType

from zk_recipes._barriers.barrier import Barrier as SyncBarrier
from zk_recipes._barriers.double_barrier import DoubleBarrier as SyncDoubleBarrier
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


class DoubleBarrier:
    """Curator's DistributedDoubleBarrier for asyncio code; ``DoubleBarrier``'s twin.

    ``aio.DoubleBarrier(client, "/barriers/job", member_qty=3)``: one object is
    one member; ``await enter(timeout)`` waits until ``member_qty`` members are
    there, ``await leave(timeout)`` until all of its round have left (False on
    a timeout, our node gone either way); ``async with barrier:`` does both.
    The waits are the sync barrier's own steps, awaited: no thread waits.
    Cancelling an ``enter()`` or a ``leave()`` deletes our member node before
    the CancelledError goes on. Sync, asyncio and Java members on one path
    take part in the same rounds.
    """

    def __init__(self, client: ZkClient, path: str, member_qty: int, *, data: bytes = b"") -> None:
        self._barrier = SyncDoubleBarrier(client, path, member_qty, data=data)
        self.client = self._barrier.client
        self.path = self._barrier.path
        self.member_qty = self._barrier.member_qty

    async def enter(self, timeout: float | None = None) -> bool:
        """Wait until ``member_qty`` members are there; False (and our node gone) on timeout."""
        return await run_awaited(self._barrier.enter_steps(timeout), None)

    async def leave(self, timeout: float | None = None) -> bool:
        """Wait until every member of our round has left; False on timeout."""
        return await run_awaited(self._barrier.leave_steps(timeout), None)

    def is_entered(self) -> bool:
        """True between a successful ``enter()`` and the next ``leave()``."""
        return self._barrier.is_entered()

    async def members(self) -> list[str]:
        """Names of the member nodes there now (read on the pool)."""
        return await run_awaited(call_step(self._barrier.members), Cancellation())

    async def __aenter__(self) -> DoubleBarrier:
        await self.enter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.leave()

    def __repr__(self) -> str:
        return "<aio." + repr(self._barrier)[1:]
