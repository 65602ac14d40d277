"""The status blueprint: ``GET <prefix>/health`` (JSON) and ``GET <prefix>/`` (a page).

Opt-in: ``app.register_blueprint(zk.status_blueprint(), url_prefix="/zk")``.
A factory: each call makes a new Blueprint, so one extension serves several
apps; its views look up the current app's state at each request, and each
app shows its own connection and namespace.

Health answers at once, without I/O: it reads the state of the client the
app already has and never waits for a connection. With no client yet (or a
closed one) it starts one in the background (``start_in_background``) and
answers 503 ``CONNECTING``; a load balancer's next probe sees the result.
200 while the state is CONNECTED or RECONNECTED (``ConnectionState.is_connected``,
as ``zk-recipes status`` exits 0; it would include READ_ONLY, which no client
reaches: read-only servers are refused). 503 while SUSPENDED (the session may live on, but no
request can be served), LOST (the session is gone; the client is
reconnecting with a new one), before the first connection (``CONNECTING``)
and once an attempt at it failed (``UNREACHABLE``). Beside ``state``, for
monitors that should not compare strings: ``connected`` (requests can be
served; RECONNECTED counts, which ``state == "CONNECTED"`` would miss) and
``writable`` (connected to a server that takes writes), and ``last_error``:
why the client is not connected, in words (``ZkClient.connection_problem``).

The page waits up to ``PAGE_CONNECT_SECONDS`` for a connection (it is for
people), then shows the connection (``zk_recipes.frameworks.connection_report``)
and every lock, semaphore and election under the namespace
(``zk_recipes.holders(client, "/")``), holders first, then the queue: the
rows of Django's admin page (``zk_recipes.frameworks.connection_rows``,
``recipe_rows``). Values are plain text and the template (shipped in the package, autoescaped as any
``.html`` Flask renders) escapes them: owner data is whatever a process
wrote. An app may override ``zk_recipes_flask/status.html`` in its own
templates folder.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, Response, current_app, jsonify, render_template

from zk_recipes import ZkRecipesError, holders
from zk_recipes.frameworks import (
    RecipeRow,
    connection_report,
    connection_rows,
    ensemble_server_rows,
    health_report,
    recipe_rows,
    spaced_hosts,
)
from zk_recipes_flask._state import AppState

#: The current app's state, as the extension finds it (``ZkRecipes.state``).
StateOf = Callable[[], AppState]

#: The longest the page waits for the app's connection.
PAGE_CONNECT_SECONDS = 3.0
#: The page's template, in this package's templates folder.
TEMPLATE = "zk_recipes_flask/status.html"


def status_blueprint(state_of: StateOf, name: str) -> Blueprint:
    """A new Blueprint with the health endpoint and the page of the apps ``state_of`` finds."""
    blueprint = Blueprint(name, __name__, template_folder="templates")

    def health() -> Response:
        return _health(state_of())

    def index() -> tuple[str, int]:
        return _page(state_of())

    blueprint.add_url_rule("/health", "health", health, methods=["GET"])
    blueprint.add_url_rule("/", "index", index, methods=["GET"])
    return blueprint


def _health(state: AppState) -> Response:
    status, body = health_report(state.process_client)
    response = jsonify(body)
    response.status_code = status
    response.headers["Cache-Control"] = "no-store"
    return response


def _page(state: AppState) -> tuple[str, int]:
    settings = state.config.client
    error: str | None = None
    recipes: tuple[RecipeRow, ...] = ()
    servers: list[tuple[str, ...]] = []
    try:
        client = state.process_client.get(min(PAGE_CONNECT_SECONDS, settings.connection_timeout))
    except ZkRecipesError as exc:
        error = str(exc)
        # What the app's client knows, if one was made; no state: it has none yet.
        current = state.process_client.current()
        known = (
            [row for row in connection_rows(connection_report(current)) if row[0] != "state"]
            if current is not None
            else [("hosts", spaced_hosts(settings.hosts))]
        )
        connection = (("state", "not connected"), *known)
    else:
        report = connection_report(client)
        connection, servers = connection_rows(report), ensemble_server_rows(report)
        try:
            recipes = recipe_rows(holders(client, "/"))
        except ZkRecipesError as exc:
            error = f"reading the holders failed: {exc}"
    page = render_template(
        TEMPLATE,
        app_name=current_app.name,
        connection=connection,
        namespace=settings.namespace,
        prefix=state.config.prefix,
        recipes=recipes,
        error=error,
        servers=servers,
    )
    return page, 200 if error is None else 503
