"""The FastAPI quick start (docs/start/fastapi.md): a route locked per order, a health route.

Run it with ``ZK_RECIPES_HOSTS=127.0.0.1:2181 uvicorn orders_api:app`` from this
folder; tests/integrations/starlette/test_quick_start.py runs it against real
ZooKeeper, in process and under a real uvicorn.
"""

from __future__ import annotations

# --8<-- [start:app]
from typing import Annotated

import gateway  # a stand-in payment gateway
from fastapi import Depends, FastAPI

from zk_recipes import aio
from zk_recipes_starlette import ZkRecipes, zk_lock

zk = ZkRecipes()  # the ZK_RECIPES_* environment variables: ZK_RECIPES_HOSTS=zk1:2181,...
app = FastAPI(lifespan=zk.lifespan)  # connects at start-up, frees every lock at shutdown


@app.post("/orders/{order_id}/charge")
async def charge(
    order_id: int, lock: Annotated[aio.Lock, Depends(zk_lock("order-{order_id}"))]
) -> dict[str, int]:
    # One charge per order at a time, across every worker on every host: a second
    # click while this one runs gets 423; ZooKeeper unreachable, 503 at once.
    await gateway.charge(order_id, fencing_token=lock.fencing_token)
    return {"charged": order_id, "token": lock.fencing_token}


@app.post("/reports/nightly")
@zk.locked("nightly-report", timeout=5)  # below the route; waits up to 5 s, then 423
async def nightly_report() -> dict[str, str]:
    return {"report": "done"}


app.add_route("/zk/health", zk.health)  # 200 while connected, 503 (and why) when not
# --8<-- [end:app]
