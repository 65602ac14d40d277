"""``ZkRecipes``: settings, one client per process tied to the app's lifespan, and its parts.

- ``zk = ZkRecipes()`` reads the ``ZK_RECIPES_*`` environment variables
  (docs/settings.md); keyword options (``ZkRecipes(hosts=...)``) are
  defaults the environment beats. Read and checked when made (no I/O), so a
  typo fails at import, not at the first request.
- ``FastAPI(lifespan=zk.lifespan)`` / ``Starlette(lifespan=zk.lifespan)``, or
  ``async with zk.lifespan(app):`` inside an app's own lifespan. Start-up
  puts the state in ``app.state.zk_recipes``, refuses routes whose lock
  decorator sits above the route's (they would run unlocked), starts
  connecting in the background (start-up never waits for ZooKeeper, never
  fails for it) and announces the ``service`` if one is set; shutdown
  withdraws it and closes the session, so the worker's ephemeral nodes (its
  locks, its instance) go at once.
- One client per process (``ProcessClient``): each uvicorn or gunicorn worker
  runs the lifespan after it started, and a client made before a fork is
  never used in the child.
- Locks (``zk.locked``, ``zk.lock``, and the ``zk_lock`` dependency) are
  ``_locking``'s; ``zk.health`` answers from the kit's ``health_report``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Literal, ParamSpec, TypeVar, overload

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from zk_recipes import (
    Lock,
    ProcessClient,
    RecipesConfig,
    RecipeUsageError,
    Spelling,
    ZkClient,
    read_settings,
)
from zk_recipes.frameworks import (
    SERVICE_SETTING,
    Announcement,
    HeldLock,
    LockedBlock,
    OnUnavailable,
    health_report,
    parse_options,
)
from zk_recipes_starlette import _locking
from zk_recipes_starlette._state import STATE_KEY, AppState, serving

P = ParamSpec("P")
R = TypeVar("R")


class ZkRecipes:
    """ZooKeeper for Starlette and FastAPI apps: ``zk = ZkRecipes()``, then its lifespan."""

    def __init__(self, *, environ: Mapping[str, str] | None = None, **options: Any) -> None:
        config = read_settings(
            os.environ if environ is None else environ,
            Spelling.ENV,
            defaults=parse_options(options),
            extra=(SERVICE_SETTING,),
        )
        process_client = ProcessClient(config.client)
        service = config.extra.get("service")
        announcement = None
        if service is not None:
            announcement = Announcement(service, lambda: process_client.get())
        #: The settings, the process's client and the announcement of this face.
        self.state = AppState(self, config, process_client, announcement)

    def __repr__(self) -> str:
        return f"<ZkRecipes {self.state.process_client!r}>"

    @property
    def config(self) -> RecipesConfig:
        """The checked settings."""
        return self.state.config

    # -- the lifespan --------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def lifespan(self, app: ASGIApp) -> AsyncIterator[None]:
        """Connect at start-up (in the background), close at shutdown; see the module note."""
        state = getattr(app, "state", None)
        if state is None:
            raise RecipeUsageError(
                f"zk.lifespan serves a Starlette or FastAPI app (one with app.state), got {app!r}"
            )
        _check_routes(getattr(app, "routes", ()))
        setattr(state, STATE_KEY, self.state)
        serving.append(self.state)
        self.state.process_client.start_in_background()
        if self.state.announcement is not None:
            self.state.announcement.start()
        try:
            yield
        finally:
            serving.remove(self.state)
            await self.aclose()

    async def aclose(self) -> None:
        """Withdraw the announcement and close the session (ephemeral nodes go at once).

        On a thread: the session's close is a round trip. A later use opens a new one.
        """
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """``aclose()`` for sync code (and ``atexit``-like hooks)."""
        if self.state.announcement is not None:
            self.state.announcement.stop()
        self.state.process_client.close()

    # -- the client ----------------------------------------------------------------
    async def get_client(self, timeout: float | None = None) -> ZkClient:
        """This process's connected client; waits up to ``timeout`` (on a thread) if it must.

        Default wait: the ``connection_timeout`` setting; ``ConnectTimeoutError``
        names the ensemble when it cannot connect. Connected, it returns at once.
        """
        current = self.state.process_client.current()
        if current is not None and current.state is not None and current.state.is_connected:
            return current
        return await asyncio.to_thread(self.state.process_client.get, timeout)

    # -- locks ---------------------------------------------------------------------
    def locked(
        self,
        name: str,
        *,
        timeout: float | None = 0.0,
        on_busy: int | Callable[..., Any] = 423,
        on_unavailable: OnUnavailable = 503,
        identifier: str | None = None,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Run the decorated route only while holding the lock ``name``; below ``@app.get``.

        ``name`` is a ``str.format`` template over the function's parameters
        (FastAPI: ``"invoice-{id}"`` on ``async def pay(id: int)``), or over the
        request's path parameters for a Starlette endpoint ``(request)``.
        ``timeout``: seconds to wait, 0 (default) not to wait, None without
        limit; then ``on_busy``: a status (423) raises ``LockBusy``, or a
        callable answers in the route's place (called with its arguments,
        awaited if awaitable). ZooKeeper unreachable: ``on_unavailable`` at
        once (503 with ``Retry-After`` via ``LockUnavailable``; ``"raise"``;
        ``"run"`` WITHOUT the lock, warned; or a callable). Async routes wait
        on the loop, sync ones on their worker thread. Inside,
        ``current_lock()`` (and ``request.state.zk_lock`` for a Starlette
        endpoint) gives the held lock. See docs/integrations/starlette.md.
        """
        return _locking.locked(
            self.state.make_target,
            name,
            timeout=timeout,
            on_busy=on_busy,
            on_unavailable=on_unavailable,
            identifier=identifier,
        )

    @overload
    def lock(
        self,
        name: str,
        *,
        timeout: float | None = None,
        on_unavailable: int | Literal["raise"] = 503,
        identifier: str | None = None,
    ) -> LockedBlock[Lock]: ...

    @overload
    def lock(
        self,
        name: str,
        *,
        timeout: float | None = None,
        on_unavailable: Literal["run"],
        identifier: str | None = None,
    ) -> LockedBlock[Lock | None]: ...

    def lock(
        self,
        name: str,
        *,
        timeout: float | None = None,
        on_unavailable: int | Literal["raise", "run"] = 503,
        identifier: str | None = None,
    ) -> LockedBlock[Lock] | LockedBlock[Lock | None]:
        """``async with zk.lock("nightly-report") as lock:``: hold a lock for a block.

        ``name`` is taken literally (no template). Waits up to ``timeout``
        seconds (None: without limit, 0: not at all) and raises
        ``LockTimeout`` if not acquired in time. ``async with`` gives an
        ``aio.Lock`` waiting on the loop (``with``, in sync code, a ``Lock``),
        which ``current_lock()`` also returns inside the block. ZooKeeper
        unreachable: a status (503) raises ``LockUnavailable``, ``"raise"``
        ``UnavailableError``, ``"run"`` runs the block WITHOUT the lock (it
        gets None), warned. One block per call.
        """
        caller = sys._getframe(1)
        where = f"{caller.f_code.co_filename}:{caller.f_lineno}"
        return _locking.block(
            self.state.make_target,
            name,
            timeout=timeout,
            on_unavailable=on_unavailable,
            identifier=identifier,
            where=where,
        )

    @staticmethod
    def current_lock() -> HeldLock:
        """The innermost lock a locked route or block holds in this task."""
        return _locking.current_lock()

    # -- health ----------------------------------------------------------------------
    async def health(self, request: Request) -> JSONResponse:
        """``GET``: 200 while connected, 503 (JSON says why) otherwise; at once, no I/O.

        ``app.add_route("/zk/health", zk.health)`` (Starlette and FastAPI).
        The body: ``state``, ``connected``, ``writable``, ``last_error``,
        ``session_id``, ``negotiated_session_timeout``. Never waits for a
        connection: with none yet it starts one and answers 503 CONNECTING.
        """
        status, body = health_report(self.state.process_client)
        return JSONResponse(body, status, headers={"Cache-Control": "no-store"})


def _check_routes(routes: Iterable[Any]) -> None:
    """Refuse a route whose endpoint is a function ``@zk.locked`` wrapped (it runs unlocked)."""
    for route in routes:
        endpoint = getattr(route, "endpoint", None)
        name = getattr(endpoint, _locking.LOCKED_MARK, None)
        if name is not None:
            path = getattr(route, "path", "?")
            raise RecipeUsageError(
                f"@zk.locked({name!r}) wraps the endpoint of the route {path!r} after the route "
                "registered it, so requests would run it WITHOUT the lock: put @zk.locked below "
                "@app.get/@app.post/@app.route, nearer the function"
            )
        _check_routes(getattr(route, "routes", ()))  # mounts and included routers
