"""Locked routes of Starlette and FastAPI apps against real ZooKeeper: every form, outages, faults.

The dependency, the decorator (on FastAPI's functions, on a Starlette
endpoint, on a sync route) and the block; busy is 423, unreachable 503 at
once, never a hang; a cancelled waiting request leaves no node; a hold lost
with its session says so; a hundred requests waiting on one lock hold no
thread each. Waits are on events and watches.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.containers import children_of
from tests.integrations.starlette.conftest import served
from zk_recipes import (
    ConfigurationError,
    ConnectionState,
    Lock,
    LockTimeout,
    NoNodeError,
    RecipeUsageError,
    UnavailableError,
    WrongTypeError,
    ZkClient,
    aio,
)
from zk_recipes.frameworks import RETRY_AFTER, lock_path
from zk_recipes.testing import (
    StateRecorder,
    TcpProxy,
    ZooKeeperServer,
    expire_session,
    wait_for_children,
)
from zk_recipes_starlette import LockUnavailable, ZkRecipes, current_lock, zk_lock

AT_ONCE = 5.0


def fastapi_app(zk: ZkRecipes, gate: asyncio.Event) -> FastAPI:
    app = FastAPI(lifespan=zk.lifespan)

    @app.get("/wait/{name}")
    async def wait(
        name: str, lock: Annotated[aio.Lock, Depends(zk_lock("wait-{name}", timeout=None))]
    ) -> dict[str, Any]:
        assert current_lock() is lock
        await gate.wait()
        return {"token": lock.fencing_token}

    @app.get("/deco/{id}")
    @zk.locked("deco-{id}")
    async def deco(id: int) -> dict[str, Any]:
        lock = current_lock()
        assert isinstance(lock, aio.Lock)
        await gate.wait()
        return {"id": id, "held": lock.is_held()}

    @app.get("/sync/{id}")
    @zk.locked("sync-{id}")
    def sync(id: int) -> dict[str, Any]:
        lock = current_lock()
        assert isinstance(lock, Lock)  # a sync route runs on a thread, with a sync Lock
        return {"id": id, "held": lock.is_held()}

    # --8<-- [start:block]
    # given: app (your FastAPI app), zk (your ZkRecipes), Any (from typing)
    @app.get("/block")
    async def block() -> dict[str, Any]:
        async with zk.lock("block", timeout=0) as lock:  # LockTimeout when held elsewhere
            return {"token": lock.fencing_token}

    # --8<-- [end:block]

    @app.get("/run")
    @zk.locked("run", on_unavailable="run")
    async def run() -> str:
        return "ran"

    app.add_route("/health", zk.health)
    return app


def no_nodes(client: ZkClient, directory: str) -> bool:
    """No contender left in ``directory`` (a lock directory is a container: it may be gone)."""
    try:
        return children_of(client, directory) == []
    except NoNodeError:
        return True


@pytest.fixture
def zk(environ: dict[str, str]) -> Iterator[ZkRecipes]:
    face = ZkRecipes(environ=environ)
    yield face
    face.close()


def test_the_dependency_the_decorator_and_the_block(zk: ZkRecipes, zk_client: ZkClient) -> None:
    async def main() -> None:
        gate = asyncio.Event()
        gate.set()
        async with served(fastapi_app(zk, gate)) as http:
            answer = await http.get("/wait/a")
            assert answer.status_code == 200
            assert answer.json()["token"] > 0
            assert (await http.get("/deco/3")).json() == {"id": 3, "held": True}
            assert (await http.get("/sync/4")).json() == {"id": 4, "held": True}
            assert (await http.get("/block")).status_code == 200
            with Lock(zk_client, lock_path("deco-3")), Lock(zk_client, lock_path("block")):
                busy = await http.get("/deco/3")
                assert busy.status_code == 423
                assert busy.json() == {"detail": "busy, try again shortly."}
                assert (await http.get("/deco/5")).status_code == 200
                with pytest.raises(LockTimeout):  # a block refuses with LockTimeout (a 500)
                    await http.get("/block")
            for name in ("wait-a", "deco-3", "sync-4", "block"):
                assert no_nodes(zk_client, lock_path(name)), name

    asyncio.run(main())


def test_a_starlette_endpoint_names_its_lock_from_the_path(
    zk: ZkRecipes, zk_client: ZkClient
) -> None:
    seen: list[Any] = []

    # --8<-- [start:starlette]
    # given: zk (your ZkRecipes), seen (a list), Request, PlainTextResponse
    # given: Starlette, Route (from starlette)
    @zk.locked("report-{name}")  # {name}: the route's path parameter
    async def report(request: Request) -> PlainTextResponse:
        seen.append(request.state.zk_lock)
        node = request.state.zk_lock.node
        return PlainTextResponse(node)

    app = Starlette(routes=[Route("/reports/{name}", report)], lifespan=zk.lifespan)
    # --8<-- [end:starlette]

    async def main() -> None:
        async with served(app) as http:
            answer = await http.get("/reports/q1 2026")
            assert answer.status_code == 200
            assert answer.text.startswith(lock_path("report-q1%202026") + "/")
            with Lock(zk_client, lock_path("report-x")):
                refused = await http.get("/reports/x")
                assert refused.status_code == 423
                assert refused.text == "busy, try again shortly."

    asyncio.run(main())
    assert isinstance(seen[0], aio.Lock)


def test_a_cancelled_waiting_request_leaves_no_node(zk: ZkRecipes, zk_client: ZkClient) -> None:
    directory = lock_path("wait-c")

    async def main() -> None:
        async with served(fastapi_app(zk, asyncio.Event())) as http:
            with Lock(zk_client, directory) as holder:
                waiting = asyncio.create_task(http.get("/wait/c"))
                await asyncio.to_thread(wait_for_children, zk_client, directory, 2)
                waiting.cancel()  # the client went away
                await asyncio.gather(waiting, return_exceptions=True)
                assert zk_client.get_children(directory) == [holder.node.rsplit("/", 1)[1]]  # type: ignore[union-attr]

    asyncio.run(main())


def test_a_hundred_waiting_requests_hold_no_thread_each(zk: ZkRecipes, zk_client: ZkClient) -> None:
    """Async routes wait on the loop: the process's threads do not grow with the waiters."""
    directory = lock_path("wait-many")
    waiters = 100

    async def main() -> None:
        gate = asyncio.Event()
        async with served(fastapi_app(zk, gate)) as http:
            before = threading.active_count()
            with Lock(zk_client, directory):
                tasks = [asyncio.create_task(http.get("/wait/many")) for _ in range(waiters)]
                await asyncio.to_thread(wait_for_children, zk_client, directory, waiters + 1, 60.0)
                grown = threading.active_count() - before  # a thread per waiter would be 100
                assert grown < 15, [t.name for t in threading.enumerate()]
            gate.set()
            answers = await asyncio.gather(*tasks)
            assert {a.status_code for a in answers} == {200}
            tokens = [a.json()["token"] for a in answers]
            assert len(set(tokens)) == waiters

    asyncio.run(main())


def test_a_hold_lost_with_its_session_is_seen_and_logged(
    zk: ZkRecipes, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        gate = asyncio.Event()
        app = fastapi_app(zk, gate)

        @app.get("/doomed")
        @zk.locked("doomed")
        async def doomed() -> dict[str, bool]:
            lock = current_lock()
            assert isinstance(lock, aio.Lock)
            await asyncio.to_thread(expire_session, lock.client)
            await asyncio.wait_for(lock.lost.wait(), 10)
            return {"held": lock.is_held()}

        async with served(app) as http:
            with caplog.at_level(logging.WARNING, logger="zk_recipes.starlette"):
                assert (await http.get("/doomed")).json() == {"held": False}
        (record,) = [r for r in caplog.records if r.name == "zk_recipes.starlette"]
        assert "was lost" in record.getMessage()

    asyncio.run(main())


@pytest.fixture
def proxy(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


async def one_503_at_once(http: httpx.AsyncClient, url: str) -> None:
    began = time.monotonic()
    answer = await http.get(url)
    assert answer.status_code == 503, url
    assert time.monotonic() - began < AT_ONCE, url
    assert answer.headers["Retry-After"] == str(RETRY_AFTER)


def test_a_paused_ensemble_is_503_at_once_not_busy(
    environ: dict[str, str], proxy: TcpProxy, zk_client: ZkClient
) -> None:
    zk = ZkRecipes(
        environ={**environ, "ZK_RECIPES_HOSTS": proxy.connect_string},
        connection_timeout=30,
    )

    async def main() -> None:
        gate = asyncio.Event()
        gate.set()
        async with served(fastapi_app(zk, gate)) as http:
            assert (await http.get("/deco/1")).status_code == 200
            client = await zk.get_client()
            states = StateRecorder()
            client.add_listener(states)
            proxy.blackhole()
            await one_503_at_once(http, "/deco/2")  # the client still thinks it is connected
            await asyncio.to_thread(states.wait_for, ConnectionState.SUSPENDED)
            for url in ("/deco/2", "/wait/b", "/block", "/sync/3"):  # a wait without limit too
                await one_503_at_once(http, url)
            assert (await http.get("/run")).text == '"ran"'
            proxy.heal()
            assert await asyncio.to_thread(client.wait_connected, 30)
            assert (await http.get("/deco/2")).status_code == 200

    try:
        asyncio.run(main())
    finally:
        zk.close()


def test_a_decorator_above_the_route_fails_the_start(zk: ZkRecipes) -> None:
    app = FastAPI(lifespan=zk.lifespan)

    @zk.locked("unlocked")  # wrong: above the route, which registered the bare function
    @app.get("/unlocked")
    async def unlocked() -> str:
        return "ran without its lock"

    async def main() -> None:
        async with served(app):
            pass

    with pytest.raises(RecipeUsageError, match=r"put @zk.locked below @app.get"):
        asyncio.run(main())


def test_a_mounted_sub_app_uses_its_parents_lifespan(zk: ZkRecipes, zk_client: ZkClient) -> None:
    app = FastAPI(lifespan=zk.lifespan)
    v2 = FastAPI()  # Starlette runs no lifespan of a mounted app

    @v2.post("/orders/{id}/charge")
    async def charge(id: int, lock: Annotated[aio.Lock, Depends(zk_lock("v2-{id}"))]) -> int:
        return lock.fencing_token

    app.mount("/v2", v2)

    async def main() -> None:
        async with served(app) as http:
            answer = await http.post("/v2/orders/3/charge")
            assert answer.status_code == 200
            assert answer.json() > 0
            with Lock(zk_client, lock_path("v2-3")):
                assert (await http.post("/v2/orders/3/charge")).status_code == 423

    asyncio.run(main())


def test_without_the_lifespan_the_dependency_says_what_to_do(zk: ZkRecipes) -> None:
    app = FastAPI()

    @app.get("/x")
    async def x(lock: Annotated[aio.Lock, Depends(zk_lock("x"))]) -> str:
        return "never"

    async def main() -> None:
        async with served(app, lifespan=False) as http:
            await http.get("/x")

    with pytest.raises(RecipeUsageError, match=r"FastAPI\(lifespan=zk.lifespan\)"):
        asyncio.run(main())


def test_bad_input_gets_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="ZK_RECIPES_HOSTS is not set"):
        ZkRecipes(environ={})
    with pytest.raises(ConfigurationError, match=r"ZkRecipes\(host=\.\.\.\) is not a setting"):
        ZkRecipes(environ={}, host="zk:2181")
    face = ZkRecipes(environ={"ZK_RECIPES_HOSTS": "127.0.0.1:1"})
    with pytest.raises(WrongTypeError, match="needs a lock name"):
        zk_lock(7)  # type: ignore[arg-type]
    with pytest.raises(WrongTypeError, match="is an HTTP status"):
        zk_lock("x", on_busy=lambda: None)  # type: ignore[arg-type]
    with pytest.raises(WrongTypeError, match="on_unavailable"):
        zk_lock("x", on_unavailable=lambda: None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="timeout must be >= 0"):
        face.locked("x", timeout=-1)
    with pytest.raises(ConfigurationError, match=r"uses \{nope\}"):

        @face.locked("x-{nope}")
        async def route(id: int) -> None: ...

    assert issubclass(LockUnavailable, UnavailableError)
