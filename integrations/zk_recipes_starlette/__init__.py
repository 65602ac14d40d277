"""zk-recipes for Starlette and FastAPI: the client in the app's lifespan, locked routes, health.

::

    zk = ZkRecipes()                         # ZK_RECIPES_* from the environment
    app = FastAPI(lifespan=zk.lifespan)      # or Starlette(lifespan=zk.lifespan)

    @app.post("/invoices/{id}/pay")          # one request per invoice at a time
    async def pay(id: int, lock: aio.Lock = Depends(zk_lock("invoice-{id}"))): ...

    @app.get("/reports/{name}")
    @zk.locked("report-{name}")              # the same, as a decorator
    async def report(name: str): ...

    app.add_route("/zk/health", zk.health)   # 200 connected, 503 not

One ZooKeeper session per process, opened by the lifespan's start-up (in
the background: start-up never waits for ZooKeeper) and closed at its
shutdown, so every lock a worker holds is free the moment it stops
(``_extension``). Busy answers 423, an unreachable ZooKeeper 503 with
``Retry-After`` at once, never a hang (``_locking``). Async routes wait on the
event loop (``zk_recipes.aio``), no thread per waiting request. Built on
the framework kit (``zk_recipes.frameworks``), as the Django and Flask faces
are. See docs/integrations/starlette.md.
"""

from __future__ import annotations

import importlib.metadata

try:
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "zk_recipes_starlette needs Starlette: install it with pip install "
        "'zk-recipes[starlette]' (or 'zk-recipes[fastapi]' for FastAPI)"
    ) from exc
else:  # the supported versions: the extra's pins (pyproject.toml)
    from zk_recipes.frameworks import require_version

    require_version(
        "zk_recipes_starlette",
        "Starlette",
        importlib.metadata.version("starlette"),
        (0, 40),
        "starlette",
    )

from zk_recipes_starlette._extension import ZkRecipes
from zk_recipes_starlette._locking import LockBusy, LockUnavailable, current_lock, zk_lock

__all__ = [
    "LockBusy",
    "LockUnavailable",
    "ZkRecipes",
    "current_lock",
    "zk_lock",
]
