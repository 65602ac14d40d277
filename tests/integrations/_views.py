"""What the Django and Flask view tests share: where the locks are, and a holder elsewhere."""

from __future__ import annotations

from zk_recipes import DEFAULT_PREFIX, Lock
from zk_recipes.testing.pytest_plugin import ClientFactory

#: Where the faces put lock ``X`` (``zk_recipes.frameworks.lock_path``'s directory).
LOCKS = f"{DEFAULT_PREFIX}/locks"
#: The longest a view test waits for anything.
WAIT = 10.0


def hold_elsewhere(zk_client_factory: ClientFactory, name: str) -> Lock:
    """The lock ``name`` held by another session, as another process would."""
    lock = Lock(zk_client_factory(), f"{LOCKS}/{name}", identifier="elsewhere")
    assert lock.acquire(timeout=WAIT)
    return lock
