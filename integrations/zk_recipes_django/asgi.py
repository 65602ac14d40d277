"""An ASGI wrapper that gives Django's ASGI application a lifespan for ZooKeeper.

Why: Django's ASGI handler refuses ``lifespan`` scopes, so servers such as
uvicorn run it without start-up and shutdown events, and the process's
ZooKeeper sessions are closed only by ``atexit``. Wrapped, the server's
shutdown closes them at once (ephemeral nodes go, locks are free for the
others) and start-up begins connecting in the background, so the first
request does not pay for the handshake::

    # asgi.py
    from django.core.asgi import get_asgi_application
    from zk_recipes_django.asgi import with_lifespan

    application = with_lifespan(get_asgi_application())

Start-up never waits for ZooKeeper and never fails the server: an ensemble
that is down is retried by the first use (``get_client``). An alias with a
``SERVICE`` registers this process as an instance at start-up (in the
background) and withdraws it at shutdown, before the sessions close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from zk_recipes import ZkRecipesError
from zk_recipes_django import _announcements, _clients, _settings

log = logging.getLogger("zk_recipes.django")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def with_lifespan(application: AsgiApp, *, connect_on_startup: bool = True) -> AsgiApp:
    """``application`` answering ``lifespan`` itself: connect at start-up, close at shutdown."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await application(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if connect_on_startup:
                    _start_connecting()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await asyncio.get_running_loop().run_in_executor(None, _clients.close_all)
                await send({"type": "lifespan.shutdown.complete"})
                return

    return app


def _start_connecting() -> None:
    try:
        for alias in _settings.aliases():
            _clients.process_client(alias).start_in_background()
        _announcements.announce()
    except ZkRecipesError as exc:  # the system checks say what is wrong; serve anyway
        log.warning("not connecting to ZooKeeper at start-up: %s", exc)
