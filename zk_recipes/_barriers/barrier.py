"""Barrier: Curator's DistributedBarrier.

The barrier is up while one node exists at ``path`` (PERSISTENT, under
CONTAINER parents). ``set_barrier`` creates it (already there is fine),
``remove_barrier`` deletes it (already gone is fine), ``wait`` loops
``exists(path, watch)`` until the node is gone. Every wake-up re-checks
(kazoo's NONE after a disconnect included); requests that fail while
disconnected are retried until the deadline (``_internals/patience.py``), and
``close()`` of the client wakes a waiter, which then raises
ClientStateError.
"""

from __future__ import annotations

import contextlib
from typing import final

from zk_recipes import _paths
from zk_recipes._barriers._common import check_data, exists_steps, waker
from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import Steps, run_blocking
from zk_recipes._deadline import remaining, wait_deadline
from zk_recipes._errors import NodeExistsError
from zk_recipes._internals.args import require_client
from zk_recipes._internals.patience import Expired, patient_steps
from zk_recipes._internals.waits import NewWake, Sleep
from zk_recipes._types import Wakeable


@final
class Barrier:
    """A barrier that is up while its node exists: ``wait()`` blocks until it is removed.

    ``Barrier(client, "/barriers/deploy")``: ``set_barrier()`` puts it up,
    ``remove_barrier()`` takes it down and releases every ``wait()``. A Java
    DistributedBarrier on the same path is the same barrier. See
    docs/recipes/barrier.md.
    """

    def __init__(self, client: ZkClient, path: str, *, data: bytes = b"") -> None:
        self.client = require_client(client, "Barrier")
        self.path = _paths.validate_writable_path(path)
        self.data = check_data(data)

    def set_barrier(self) -> None:
        """Put the barrier up (a PERSISTENT node). Already up is fine."""
        with contextlib.suppress(NodeExistsError):
            self.client.create(self.path, self.data, parents=True)

    def remove_barrier(self) -> None:
        """Take the barrier down, releasing every waiter. Already down is fine."""
        self.client.retry(lambda: self.client.delete(self.path))

    def is_set(self) -> bool:
        """True while the barrier is up."""
        return self.client.retry(lambda: self.client.exists(self.path)) is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the barrier is down; False if it was still up after ``timeout`` s."""
        return run_blocking(self.wait_steps(timeout))

    def wait_steps(self, timeout: float | None = None) -> Steps[bool]:
        """``wait`` as steps (_client/steps.py): what the asyncio form awaits."""
        deadline = wait_deadline(timeout)
        self.client.check_usable()  # fail fast when the client is closed or forked
        client, path = self.client, self.path
        while True:
            changed: Wakeable = yield NewWake()
            try:
                stat = yield from patient_steps(
                    client, deadline, exists_steps(client, path, waker(changed))
                )
            except Expired:
                return False
            if stat is None:
                return True
            # Deleted, changed, or kazoo's NONE after a disconnect: look again.
            with client.wake_on_close(changed):
                if not (yield Sleep(changed, remaining(deadline))):
                    return False

    def __repr__(self) -> str:
        return f"<Barrier {self.path}>"
