"""The Starlette/FastAPI tests: real apps served in process (httpx) on this test's ZooKeeper.

``environ`` is the ``ZK_RECIPES_*`` environment of a ``ZkRecipes`` on this
test's server and namespace (a short session, for the expiry tests);
``served(app)`` runs the app's lifespan and gives an httpx ``AsyncClient``
on it, so start-up and shutdown run as under a server.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

pytest.importorskip("starlette")
pytest.importorskip("fastapi")
pytest.importorskip("httpx")

import httpx
from starlette.types import ASGIApp

#: Session timeout of the tests' apps: short, for the expiry tests.
SESSION_TIMEOUT = 3.0


@pytest.fixture
def environ(zk_hosts: str, zk_namespace: str) -> dict[str, str]:
    return {
        "ZK_RECIPES_HOSTS": zk_hosts,
        "ZK_RECIPES_NAMESPACE": zk_namespace,
        "ZK_RECIPES_SESSION_TIMEOUT": str(SESSION_TIMEOUT),
    }


@contextlib.asynccontextmanager
async def served(app: ASGIApp, *, lifespan: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on ``app``, inside the app's lifespan (start-up before, shutdown after)."""
    transport = httpx.ASGITransport(app=app)
    async with contextlib.AsyncExitStack() as stack:
        if lifespan:
            await stack.enter_async_context(app.router.lifespan_context(app))  # type: ignore[attr-defined]
        yield await stack.enter_async_context(
            httpx.AsyncClient(transport=transport, base_url="http://test")
        )
