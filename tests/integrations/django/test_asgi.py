"""The ASGI lifespan wrapper: connect at start-up, close at shutdown; HTTP passes through."""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.asgi import get_asgi_application

import zk_recipes_django
from zk_recipes import ConnectionState
from zk_recipes.testing import wait_until
from zk_recipes_django.asgi import with_lifespan


def test_lifespan_connects_at_startup_and_closes_at_shutdown(zk_settings: dict[str, Any]) -> None:
    app = with_lifespan(get_asgi_application())
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(dict(message))

    async def lifespan() -> None:
        async def serve() -> None:
            await app({"type": "lifespan"}, inbox.get, send)

        task = asyncio.create_task(serve())
        await inbox.put({"type": "lifespan.startup"})
        while not sent:
            await asyncio.sleep(0.01)
        assert sent == [{"type": "lifespan.startup.complete"}]
        await asyncio.get_running_loop().run_in_executor(
            None,
            lambda: wait_until(
                lambda: (
                    (client := zk_recipes_django.current_client()) is not None
                    and client.state is ConnectionState.CONNECTED
                ),
                "connected in the background",
            ),
        )
        client = zk_recipes_django.current_client()
        assert client is not None
        await inbox.put({"type": "lifespan.shutdown"})
        await task
        assert sent[-1] == {"type": "lifespan.shutdown.complete"}
        assert client.state is ConnectionState.CLOSED

    asyncio.run(lifespan())
    assert zk_recipes_django.current_client() is None


def test_http_passes_through_to_django(zk_settings: dict[str, Any]) -> None:
    app = with_lifespan(get_asgi_application())
    sent: list[dict[str, Any]] = []

    bodies = [{"type": "http.request", "body": b"", "more_body": False}]
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if bodies:
            return bodies.pop()
        await never.wait()  # the client stays connected until the response is sent
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "path": "/admin/login/",
        "raw_path": b"/admin/login/",
        "query_string": b"",
        "headers": [(b"host", b"testserver")],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 1234),
        "scheme": "http",
    }

    async def request() -> None:
        await app(scope, receive, send)

    asyncio.run(request())
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 200
    assert zk_recipes_django.current_client() is None  # a page without ZooKeeper connects nothing
