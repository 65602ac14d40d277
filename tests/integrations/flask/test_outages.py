"""Flask's locked views when ZooKeeper is down: 503 at once, 423 only when held, never a hang.

Seen before: with ZooKeeper paused, ``@zk.locked(timeout=0)`` blocked 6.6 s and
answered ``423 Locked: busy`` although nobody held the lock; later requests
blocked 15 s (the connection timeout) and gave 500. An ensemble that is not
there is a closed port; a paused one is a black-holed proxy (TCP accepted,
nothing answered). The bounds are far under the connection timeout (30 s
here): they prove "no waiting for a connection", not a speed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask, g

from tests.integrations.flask.conftest import AppFactory
from zk_recipes import ConnectionState, Lock, RecipeUsageError, UnavailableError, ZkClient
from zk_recipes.frameworks import RETRY_AFTER, lock_path
from zk_recipes.testing import StateRecorder, TcpProxy, ZooKeeperServer, free_ports
from zk_recipes_flask import LockUnavailable, ZkRecipes

#: What a face used to wait; nothing here may come near it.
CONNECTION_TIMEOUT = 30.0
AT_ONCE = 5.0


def add_views(app: Flask, zk: ZkRecipes) -> None:
    @app.get("/charge/<int:id>")
    @zk.locked("charge-{id}")
    def charge(id: int) -> str:
        return f"charged {id}"

    @app.get("/async/<int:id>")
    @zk.locked("charge-{id}")
    async def async_charge(id: int) -> str:
        return f"charged {id}"

    @app.get("/raise")
    @zk.locked("raise", on_unavailable="raise")
    def raises() -> str:
        return "ran"

    @app.get("/run")
    @zk.locked("run", on_unavailable="run")
    def runs() -> str:
        return f"ran, lock={g.get('zk_lock')!r}"

    @app.get("/teapot")
    @zk.locked("teapot", on_unavailable=lambda: ("down, using the cache", 200))
    def answers() -> str:
        return "ran"

    @app.get("/block")
    def block() -> str:
        with zk.lock("block", timeout=0) as lock:
            return f"held {lock.fencing_token}"

    @app.get("/block-run")
    def block_run() -> str:
        with zk.lock("block", timeout=0, on_unavailable="run") as lock:
            return f"ran with {lock!r}"


@pytest.fixture
def proxy(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def _app(make_app: AppFactory, hosts: str) -> tuple[Flask, ZkRecipes]:
    app, zk = make_app(ZK_RECIPES_HOSTS=hosts, ZK_RECIPES_CONNECTION_TIMEOUT=CONNECTION_TIMEOUT)
    add_views(app, zk)
    return app, zk


def _get(app: Flask, url: str) -> tuple[int, Any, float]:
    began = time.monotonic()
    answer = app.test_client().get(url)
    return answer.status_code, answer, time.monotonic() - began


def test_an_ensemble_that_is_not_there_answers_503_at_once_every_time(
    make_app: AppFactory,
) -> None:
    (port,) = free_ports(1)
    app, _ = _app(make_app, f"127.0.0.1:{port}")
    for url in ("/charge/1", "/charge/2", "/async/3", "/block", "/charge/1"):
        status, answer, took = _get(app, url)
        assert status == 503, (url, answer.get_data(as_text=True))
        assert took < AT_ONCE
        assert answer.headers["Retry-After"] == str(RETRY_AFTER)
        assert answer.get_data() == b"Service Unavailable: try again shortly.\n"


def test_a_paused_ensemble_is_503_not_busy_and_held_is_423(
    make_app: AppFactory, proxy: TcpProxy, zk_client: ZkClient
) -> None:
    app, zk = _app(make_app, proxy.connect_string)
    assert _get(app, "/charge/1")[0] == 200
    with Lock(zk_client, lock_path("charge-1")):
        assert _get(app, "/charge/1")[0] == 423, "held elsewhere: busy"
    client = zk.get_client(app)
    states = StateRecorder()
    client.add_listener(states)

    proxy.blackhole()
    status, _, took = _get(app, "/charge/2")  # the client still thinks it is connected
    assert status == 503
    assert took < AT_ONCE
    states.wait_for(ConnectionState.SUSPENDED)
    for url in ("/charge/3", "/async/4", "/block"):
        status, answer, took = _get(app, url)
        assert status == 503, url
        assert took < AT_ONCE
        assert answer.headers["Retry-After"] == str(RETRY_AFTER)

    proxy.heal()
    assert client.wait_connected(CONNECTION_TIMEOUT)
    assert _get(app, "/charge/2")[0] == 200
    assert _get(app, "/block")[0] == 200


def test_on_unavailable_raise_run_and_a_callable(
    make_app: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    (port,) = free_ports(1)
    app, _ = _app(make_app, f"127.0.0.1:{port}")
    app.testing = True  # exceptions reach the test
    with pytest.raises(UnavailableError, match="no connection to ZooKeeper") as raised:
        app.test_client().get("/raise")
    assert not isinstance(raised.value, LockUnavailable), "raise: the plain error"
    with caplog.at_level(logging.WARNING, logger="zk_recipes.flask"):
        status, answer, _ = _get(app, "/run")
    assert (status, answer.get_data(as_text=True)) == (200, "ran, lock=None")
    assert "ran WITHOUT its lock" in caplog.text
    status, answer, _ = _get(app, "/teapot")
    assert (status, answer.get_data(as_text=True)) == (200, "down, using the cache")
    status, answer, _ = _get(app, "/block-run")
    assert (status, answer.get_data(as_text=True)) == (200, "ran with None")


def test_outside_a_request_a_status_is_the_plain_error(make_app: AppFactory) -> None:
    (port,) = free_ports(1)
    app, zk = _app(make_app, f"127.0.0.1:{port}")

    @zk.locked("job")
    def job() -> str:
        return "ran"

    with app.app_context():
        with pytest.raises(UnavailableError) as raised:
            job()
        assert not isinstance(raised.value, LockUnavailable)
        with pytest.raises(UnavailableError), zk.lock("job"):
            pass


def test_bad_on_unavailable_values_say_what_is_allowed(make_app: AppFactory) -> None:
    _, zk = make_app()
    with pytest.raises(TypeError, match=r'an HTTP status .like 503., "raise", "run"'):
        zk.locked("x", on_unavailable="ignore")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="has no function to call in its place"):
        zk.lock("x", on_unavailable=lambda: None)  # type: ignore[call-overload]


def test_locked_above_the_route_is_refused_at_import_and_at_request(
    make_app: AppFactory,
) -> None:
    app, zk = make_app()

    def view() -> str:
        return "unlocked!"

    registered = app.get("/misordered")(view)
    with pytest.raises(RecipeUsageError, match=r"put @zk\.locked below @app\.route"):
        zk.locked("x")(registered)

    # A blueprint registers later: the request itself is refused.
    from flask import Blueprint

    blueprint = Blueprint("shop", __name__)

    @zk.locked("y")
    @blueprint.get("/later")
    def later() -> str:
        return "unlocked!"

    app.register_blueprint(blueprint)
    app.testing = True
    with pytest.raises(RecipeUsageError, match=r"@zk.locked\('y'\) wraps the view 'shop.later'"):
        app.test_client().get("/later")
    assert app.test_client().get("/misordered").status_code == 200  # not wrapped: not refused
