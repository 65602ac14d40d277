"""The FastAPI quick start (example_projects/fastapi_app/orders_api.py), as a reader runs it.

Loaded from its file with the environment the page tells users to set: a
charge takes the order's lock (200, its fencing token the node's czxid), a
second click while the first is inside gets 423, an unreachable ZooKeeper
503 with ``Retry-After`` at once, and the app's shutdown frees a lock that a
request still holds at once (no wait for the session to expire).
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.containers import children_of
from tests.integrations.starlette.conftest import served
from zk_recipes import Lock, ZkClient
from zk_recipes.frameworks import RETRY_AFTER, lock_path
from zk_recipes.testing import free_ports, wait_for_children

EXAMPLE = Path(__file__).resolve().parents[3] / "example_projects" / "fastapi_app"
#: Far under any connection timeout: "answered without waiting for a connection".
AT_ONCE = 5.0


def load_orders_api(name: str) -> ModuleType:
    """A fresh module of orders_api.py: its ZkRecipes reads the environment as it is now."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLE / "orders_api.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def quick_start(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]) -> Iterator[ModuleType]:
    """orders_api.py loaded afresh with ``environ`` (and its stand-in gateway)."""
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    sys.modules.pop("gateway", None)
    module = load_orders_api("orders_api_under_test")
    yield module
    module.zk.close()
    sys.modules.pop("gateway", None)


def test_a_second_click_is_423_and_the_lock_is_fenced(
    quick_start: ModuleType, zk_client: ZkClient
) -> None:
    gateway: Any = sys.modules["gateway"]  # the stand-in the example imports

    async def main() -> None:
        gateway.hold, gateway.waiting = asyncio.Event(), asyncio.Event()
        async with served(quick_start.app) as http:
            first = asyncio.create_task(http.post("/orders/7/charge"))
            await gateway.waiting.wait()  # the first click is inside its lock
            (node,) = zk_client.get_children(lock_path("order-7"))
            token = zk_client.exists(f"{lock_path('order-7')}/{node}").czxid  # type: ignore[union-attr]
            second = await http.post("/orders/7/charge")
            assert second.status_code == 423
            assert second.json() == {"detail": "busy, try again shortly."}
            gateway.hold.set()
            answer = await first
            assert answer.status_code == 200
            assert answer.json() == {"charged": 7, "token": token}
            assert gateway.charges == [(7, token)]
            assert (await http.post("/orders/7/charge")).status_code == 200
            assert children_of(zk_client, lock_path("order-7")) == []
            report = await http.post("/reports/nightly")
            assert report.json() == {"report": "done"}
            health = await http.get("/zk/health")
            assert health.status_code == 200
            assert health.json()["connected"] is True

    asyncio.run(main())


def test_held_by_another_process_is_423_and_waited_for_is_200(
    quick_start: ModuleType, zk_client: ZkClient
) -> None:
    async def main() -> None:
        async with served(quick_start.app) as http:
            with Lock(zk_client, lock_path("order-1")):
                assert (await http.post("/orders/1/charge")).status_code == 423
            assert (await http.post("/orders/1/charge")).status_code == 200
            other = Lock(zk_client, lock_path("nightly-report"))
            other.acquire()
            report = asyncio.create_task(http.post("/reports/nightly"))  # waits up to 5 s
            await asyncio.to_thread(wait_for_children, zk_client, lock_path("nightly-report"), 2)
            await asyncio.to_thread(other.release)
            assert (await report).status_code == 200

    asyncio.run(main())


def test_zookeeper_unreachable_is_503_at_once(
    monkeypatch: pytest.MonkeyPatch, quick_start: ModuleType
) -> None:
    (port,) = free_ports(1)
    monkeypatch.setenv("ZK_RECIPES_HOSTS", f"127.0.0.1:{port}")  # nothing listens
    monkeypatch.setenv("ZK_RECIPES_CONNECTION_TIMEOUT", "30")
    down = load_orders_api("orders_api_down")

    async def main() -> None:
        async with served(down.app) as http:
            for _ in range(3):
                began = time.monotonic()
                answer = await http.post("/orders/1/charge")
                assert time.monotonic() - began < AT_ONCE
                assert answer.status_code == 503
                assert answer.headers["Retry-After"] == str(RETRY_AFTER)
                assert answer.json() == {"detail": "try again shortly."}
            assert (await http.post("/reports/nightly")).status_code == 503
            health = await http.get("/zk/health")
            assert health.status_code == 503
            assert health.json()["state"] in ("CONNECTING", "UNREACHABLE")

    try:
        asyncio.run(main())
    finally:
        down.zk.close()


def test_shutdown_frees_a_lock_a_request_still_holds_at_once(
    quick_start: ModuleType, zk_client: ZkClient
) -> None:
    gateway: Any = sys.modules["gateway"]  # the stand-in the example imports
    directory = lock_path("order-9")

    async def main() -> None:
        gateway.hold, gateway.waiting = asyncio.Event(), asyncio.Event()
        async with served(quick_start.app) as http:
            inside = asyncio.create_task(http.post("/orders/9/charge"))
            await gateway.waiting.wait()
            assert len(children_of(zk_client, directory)) == 1
        # The lifespan's shutdown closed the session: the node went with it, now (and the
        # emptied directory, a container, may be reaped by the server any time).
        assert children_of(zk_client, directory) == []
        inside.cancel()
        await asyncio.gather(inside, return_exceptions=True)

    asyncio.run(main())
