"""The app the uvicorn and gunicorn tests serve: a route that holds its lock until the end.

``ZK_RECIPES_*`` from the environment, as a deployed app has them. With
``HELD_APP_CONNECT_AT_IMPORT`` set to a file name, the importing process
connects at once and writes its session id there: under ``gunicorn
--preload`` that is the master, whose client every worker inherits at the
fork and must not use.
"""

from __future__ import annotations

import asyncio
import os
from typing import Annotated

from fastapi import Depends, FastAPI

from zk_recipes import aio
from zk_recipes_starlette import ZkRecipes, zk_lock

zk = ZkRecipes()
app = FastAPI(lifespan=zk.lifespan)

if os.environ.get("HELD_APP_CONNECT_AT_IMPORT"):
    parent = zk.state.process_client.get()
    with open(os.environ["HELD_APP_CONNECT_AT_IMPORT"], "w") as out:
        out.write(f"0x{parent.session_id:x}")
app.add_route("/zk/health", zk.health)


@app.get("/hold/{name}")
async def hold(name: str, lock: Annotated[aio.Lock, Depends(zk_lock("{name}"))]) -> None:
    await asyncio.Event().wait()  # held until the server stops
