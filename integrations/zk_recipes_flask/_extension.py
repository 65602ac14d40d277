"""``ZkRecipes``: the Flask extension, in flask-sqlalchemy's shape.

- ``ZkRecipes(app)`` or ``zk = ZkRecipes()`` then ``zk.init_app(app)`` in an
  app factory. Constructor options are defaults by canonical name
  (``ZkRecipes(hosts=..., session_timeout=...)``); the app's config
  (``ZK_RECIPES_HOSTS``, ...; docs/settings.md) beats them.
- State lives in ``app.extensions["zk_recipes"]``, never on the extension,
  so one extension serves several apps (each with its own settings and
  client).
- One client per (app, process), made on first use (``ProcessClient``: after
  a fork a worker makes its own, never touching the parent's session), kept
  for the process's life and closed at exit. Never one session per request:
  a session handshake per request is slow, and ephemeral nodes would not
  outlive the request.
- ``init_app`` reads and checks the settings (no I/O), so a typo fails the
  app's start, not its first request.
- ``ZK_RECIPES_SERVICE`` (or ``ZkRecipes(service={...})``): the instance of
  a service this process is while it serves, registered by ``zk.announce()``
  (gunicorn: ``zk_recipes_flask.gunicorn``'s hooks do it per worker) and
  withdrawn by ``close_all()``, ``zk.close()`` or at exit (the kit's
  ``Announcement``).
- Locks on views and code (``zk.locked``, ``zk.lock``) are ``_locking``'s;
  the status blueprint (``zk.status_blueprint()``) is ``_status``'s.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any, Literal, ParamSpec, TypeVar, overload

from flask import Blueprint, Flask, has_app_context

from zk_recipes import (
    ConfigurationError,
    Lock,
    ProcessClient,
    RecipesConfig,
    RecipeUsageError,
    Spelling,
    WrongTypeError,
    ZkClient,
    read_settings,
)
from zk_recipes.frameworks import (
    SERVICE_SETTING,
    Announcement,
    HeldLock,
    LockedBlock,
    OnUnavailable,
    parse_options,
)
from zk_recipes_flask import _locking, _status
from zk_recipes_flask._cli import zk_group
from zk_recipes_flask._state import EXTENSION_KEY, AppState, state_of

P = ParamSpec("P")
R = TypeVar("R")

#: Every app's ProcessClient, for ``close_all()`` (a gunicorn ``worker_exit`` hook).
_all_clients: weakref.WeakSet[ProcessClient] = weakref.WeakSet()
#: Every app's announcement (apps with a SERVICE), for ``announce_all()`` and ``close_all()``.
_all_announcements: weakref.WeakSet[Announcement] = weakref.WeakSet()
_all_lock = threading.Lock()


class ZkRecipes:
    """ZooKeeper for Flask apps: ``zk = ZkRecipes(app)`` or ``zk.init_app(app)``."""

    def __init__(self, app: Flask | None = None, **options: Any) -> None:
        self._defaults = parse_options(options)
        #: The apps this extension serves (``@zk.locked`` refuses their views).
        self._apps: weakref.WeakSet[Flask] = weakref.WeakSet()
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Read the app's ``ZK_RECIPES_*`` config, register the state and ``flask zk``."""
        if EXTENSION_KEY in app.extensions:
            raise RecipeUsageError(
                f"ZkRecipes is already initialised for the app {app.name!r}: call init_app "
                "once per app"
            )
        config = read_settings(
            app.config, Spelling.FLASK, defaults=self._defaults, extra=(SERVICE_SETTING,)
        )
        process_client = ProcessClient(config.client)
        service = config.extra.get("service")
        announcement = None
        if service is not None:
            announcement = Announcement(service, lambda: process_client.get())
        with _all_lock:
            _all_clients.add(process_client)
            if announcement is not None:
                _all_announcements.add(announcement)
        app.extensions[EXTENSION_KEY] = AppState(self, config, process_client, announcement)
        self._apps.add(app)
        app.before_request(functools.partial(_locking.check_view, app))
        if "zk" not in app.cli.commands:
            app.cli.add_command(zk_group)

    # -- for code running in an app context ------------------------------------
    @property
    def client(self) -> ZkClient:
        """The current app's connected client (made and started on first use)."""
        return self.get_client()

    def get_client(self, app: Flask | None = None, timeout: float | None = None) -> ZkClient:
        """The connected client of ``app`` (default: ``current_app``) in this process.

        Waits up to ``timeout`` (default: ``ZK_RECIPES_CONNECTION_TIMEOUT``);
        ``ConnectTimeoutError`` names the ensemble when it cannot connect.
        """
        return self.state(app).process_client.get(timeout)

    def config(self, app: Flask | None = None) -> RecipesConfig:
        """The checked settings of ``app`` (default: ``current_app``)."""
        return self.state(app).config

    def close(self, app: Flask | None = None) -> None:
        """Close ``app``'s client in this process (its ephemeral nodes go at once).

        Its announced instance is withdrawn first.
        """
        state = self._process_state(app, "close")
        if state.announcement is not None:
            state.announcement.stop()
        state.process_client.close()

    def announce(self, app: Flask | None = None) -> Announcement:
        """Register this process as an instance of ``ZK_RECIPES_SERVICE``; returns at once.

        In the background (``.registered`` is set once the node exists), per
        process, idempotent; withdrawn by ``close()``, ``close_all()`` or at
        exit. Call it where the app starts serving: gunicorn's
        ``post_worker_init`` (``zk_recipes_flask.gunicorn``), or after
        ``create_app`` in the serving process.
        """
        state = self._process_state(app, "announce")
        if state.announcement is None:
            raise RecipeUsageError(
                "no service to announce: set ZK_RECIPES_SERVICE = "
                '{"NAME": "orders", "PORT": 8000} or ZkRecipes(service={...})'
            )
        state.announcement.start()
        return state.announcement

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
        """Run the decorated view or function only while holding the lock ``name``.

        ``name`` is a ``str.format`` template over the function's parameters,
        so a view's URL variables (``"invoice-{id}"`` on ``def invoice(id)``),
        its values quoted for a znode name. ``timeout``: seconds to wait, 0
        (default) not to wait, None without limit. When not acquired in time,
        ``on_busy`` decides: a status code (default 423 Locked) raises
        ``LockBusy`` in a request (Flask answers with that status and a short
        plain-text body) and ``LockTimeout`` outside one; a callable is called
        with the same arguments and its result (awaited if awaitable, in an
        async view) is returned. ``identifier`` goes into the lock node
        (default: the function's dotted path).

        When ZooKeeper is unavailable (the client is not connected, or did
        not answer the attempt), ``on_unavailable`` decides, at once: a
        status (default 503, with ``Retry-After``) raises ``LockUnavailable``
        in a request and ``UnavailableError`` outside one; ``"raise"``;
        ``"run"`` (WITHOUT the lock, with a warning: only for work that is
        safe to run twice at once); or a callable, as ``on_busy``'s.

        Sync and async views alike; the app is the current one at each call.
        Inside, ``g.zk_lock`` and ``current_lock()`` give the held Lock. Put
        it below ``@app.route``. See docs/integrations/flask.md.
        """
        return _locking.locked(
            self.state,
            name,
            timeout=timeout,
            on_busy=on_busy,
            on_unavailable=on_unavailable,
            identifier=identifier,
            apps=lambda: list(self._apps),
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
        """``with zk.lock("nightly-report") as lock:`` (or ``async with``): hold a lock for a block.

        ``name`` is taken literally (no template). Waits up to ``timeout``
        seconds (None: without limit, 0: not at all) and raises
        ``LockTimeout`` if not acquired in time. Yields the held
        ``zk_recipes.Lock``, which ``current_lock()`` also returns inside the
        block. Needs an app context when entered; the async form waits on the
        loop and gives an ``aio.Lock``. One block per call.

        When ZooKeeper is unavailable: a status (default 503) raises
        ``LockUnavailable`` in a request (``UnavailableError`` outside one);
        ``"raise"`` raises ``UnavailableError``; ``"run"`` runs the block
        WITHOUT the lock and gives it None, with a warning.
        """
        caller = sys._getframe(1)
        code = caller.f_code
        where = (
            f"{caller.f_globals.get('__name__', '?')}.{getattr(code, 'co_qualname', code.co_name)}"
        )
        return _locking.lock(
            self.state,
            name,
            timeout=timeout,
            on_unavailable=on_unavailable,
            identifier=identifier,
            where=where,
        )

    @staticmethod
    def current_lock() -> HeldLock:
        """The innermost lock held by ``@zk.locked`` or ``zk.lock()`` in this thread or task.

        A ``Lock`` in sync code, an ``aio.Lock`` in async views and blocks.
        """
        return _locking.current_lock()

    # -- the status blueprint ------------------------------------------------------
    def status_blueprint(self, name: str = "zk_recipes_status") -> Blueprint:
        """A new Blueprint with ``GET /health`` (JSON) and ``GET /`` (a status page).

        ``app.register_blueprint(zk.status_blueprint(), url_prefix="/zk")``.
        Each call makes a new Blueprint, for each app this extension serves;
        its endpoints are ``<name>.health`` and ``<name>.index``. Health
        answers at once: 200 while connected (READ_ONLY included), 503 while
        SUSPENDED, LOST or connecting. See docs/integrations/flask.md.
        """
        if not isinstance(name, str):
            raise WrongTypeError(f"name must be a blueprint name (a str), got {name!r}")
        if not name or "." in name:
            raise ConfigurationError(
                f"name must be a blueprint name without dots, like 'zk_ops', got {name!r}"
            )
        return _status.status_blueprint(self.state, name)

    def state(self, app: Flask | None = None, *, call: str = "get_client") -> AppState:
        """The app's state (default: ``current_app``'s); a fix-it error without ``init_app``."""
        return state_of(app, extension=self, call=call)

    def _process_state(self, app: Flask | None, call: str) -> AppState:
        """For the process's own calls (announce, close): ``app``, or the one app served.

        They are made where the process starts serving or stops, outside any
        app context: an extension made for one app (``ZkRecipes(app)`` or one
        ``init_app``) uses that app, so ``zk.announce()`` after ``create_app``
        works as the page writes it. Requests and commands keep needing their
        app context (``client``, ``@zk.locked``).
        """
        if app is None and not has_app_context():
            served = list(self._apps)
            if len(served) == 1:
                app = served[0]
        return self.state(app, call=call)


def close_all() -> None:
    """Close every app's client in this process (their ephemeral nodes go at once).

    For servers that end a worker without running ``atexit`` hooks, e.g. in
    gunicorn's ``worker_exit``. The next use opens a new session. Announced
    instances are withdrawn first.
    """
    with _all_lock:
        clients = list(_all_clients)
        announcements = list(_all_announcements)
    for announcement in announcements:
        announcement.stop()
    for process_client in clients:
        process_client.close()


def announce_all() -> None:
    """Start every app's announcement in this process (apps with a SERVICE)."""
    with _all_lock:
        announcements = list(_all_announcements)
    for announcement in announcements:
        announcement.start()
