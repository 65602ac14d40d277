"""The app the uvicorn tests serve: a route that holds its lock until the process ends.

``ZK_RECIPES_*`` from the environment, as a deployed app has them.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, FastAPI

from zk_recipes import aio
from zk_recipes_starlette import ZkRecipes, zk_lock

zk = ZkRecipes()
app = FastAPI(lifespan=zk.lifespan)
app.add_route("/zk/health", zk.health)


@app.get("/hold/{name}")
async def hold(name: str, lock: Annotated[aio.Lock, Depends(zk_lock("{name}"))]) -> None:
    await asyncio.Event().wait()  # held until the server stops
