"""The status blueprint on real ZooKeeper: ``GET /zk/health`` and the page ``GET /zk/``.

The health test that breaks a server uses ``zk_private_server`` (its own
server, paused and resumed here) and follows the client's states through a
StateRecorder, so each answer is asked for once the state it checks has
come; polling only waits for the reconnection, which no event of ours tells.
"""

from __future__ import annotations

import pytest
from flask import Flask, url_for

from tests.integrations.flask.conftest import AppFactory
from zk_recipes import ConfigurationError, ConnectionState, ZkClient
from zk_recipes.testing import (
    StateRecorder,
    TcpProxy,
    ZooKeeperServer,
    free_ports,
    wait_until,
)
from zk_recipes_flask import ZkRecipes

LOCKS = "/zk-recipes/locks"


def status_app(make_app: AppFactory, **config: object) -> tuple[Flask, ZkRecipes]:
    app, zk = make_app(**config)
    app.register_blueprint(zk.status_blueprint(), url_prefix="/zk")
    return app, zk


def health(app: Flask) -> tuple[int, dict[str, object]]:
    answer = app.test_client().get("/zk/health")
    assert answer.content_type == "application/json"
    assert answer.headers["Cache-Control"] == "no-store"
    body = answer.get_json()
    assert set(body) == {
        "state",
        "connected",
        "writable",
        "last_error",
        "session_id",
        "negotiated_session_timeout",
    }
    return answer.status_code, body


def session_of(client: ZkClient) -> str:
    return f"0x{client.session_id:x}"


# -- health ---------------------------------------------------------------------------


def test_health_is_200_while_connected(make_app: AppFactory) -> None:
    app, zk = status_app(make_app)
    client = zk.get_client(app)
    status, body = health(app)
    assert status == 200
    assert body == {
        "state": "CONNECTED",
        "connected": True,
        "writable": True,
        "last_error": None,
        "session_id": session_of(client),
        "negotiated_session_timeout": client.negotiated_session_timeout,
    }


def test_health_without_a_client_starts_one_in_the_background_and_says_503(
    make_app: AppFactory,
) -> None:
    app, zk = status_app(make_app)
    assert zk.state(app).process_client.current() is None
    status, body = health(app)
    assert (status, body["state"], body["session_id"]) == (503, "CONNECTING", None)
    assert (body["connected"], body["writable"]) == (False, False)
    assert zk.state(app).process_client.current() is not None  # made, and connecting
    wait_until(lambda: health(app)[0] == 200, "the background start connected")
    assert health(app)[1]["session_id"] == session_of(zk.get_client(app))


def test_health_answers_at_once_while_the_connection_hangs(
    make_app: AppFactory, zk_proxy: TcpProxy
) -> None:
    zk_proxy.blackhole()  # the handshake gets no answer until heal()
    app, _ = status_app(
        make_app, ZK_RECIPES_HOSTS=zk_proxy.connect_string, ZK_RECIPES_CONNECTION_TIMEOUT=30.0
    )
    assert health(app)[0] == 503
    wait_until(lambda: zk_proxy.accepted > 0, "the background start reached the server")
    # The start hangs now; health waiting for it would outlast the test's timeout.
    for _ in range(3):
        status, body = health(app)
        assert (status, body["state"]) == (503, "CONNECTING")
    zk_proxy.heal()
    wait_until(lambda: health(app)[0] == 200, "connected once the network healed", timeout=20.0)


def test_health_of_an_ensemble_that_refuses_says_unreachable_and_why(
    make_app: AppFactory,
) -> None:
    (port,) = free_ports(1)
    app, _ = status_app(
        make_app, ZK_RECIPES_HOSTS=f"127.0.0.1:{port}", ZK_RECIPES_CONNECTION_TIMEOUT=30.0
    )
    assert health(app)[0] == 503
    wait_until(lambda: health(app)[1]["state"] == "UNREACHABLE", "the first attempt failed")
    status, body = health(app)
    assert (status, body["connected"], body["writable"]) == (503, False, False)
    assert "Connection refused" in str(body["last_error"])


@pytest.mark.slow
def test_health_is_503_while_the_server_is_paused_past_expiry_then_200_with_a_new_session(
    make_app: AppFactory, zk_private_server: ZooKeeperServer
) -> None:
    app, zk = status_app(make_app, ZK_RECIPES_HOSTS=zk_private_server.connect_string)
    client = zk.get_client(app)
    recorder = StateRecorder()
    client.add_listener(recorder)
    status, body = health(app)
    assert (status, body["state"]) == (200, "CONNECTED")
    before = body["session_id"]
    zk_private_server.pause()
    try:
        recorder.wait_for(ConnectionState.SUSPENDED)
        status, body = health(app)
        assert status == 503
        assert body["state"] in ("SUSPENDED", "LOST")
        assert body["connected"] is False
        lost = recorder.wait_for(ConnectionState.LOST)
        assert lost.simulated  # the client gave the session up; the server sleeps
        status, body = health(app)
        assert (status, body["state"]) == (503, "LOST")
    finally:
        zk_private_server.resume()
    wait_until(lambda: health(app)[0] == 200, "health is 200 again", timeout=20.0)
    status, body = health(app)
    assert body["state"] in ("CONNECTED", "RECONNECTED")
    assert body["connected"] is True  # RECONNECTED too: compare this, not the state
    assert body["session_id"] not in (before, None)
    assert body["session_id"] == session_of(client)


# -- the page -------------------------------------------------------------------------


def test_page_lists_a_held_lock_with_its_identifier_escaped(make_app: AppFactory) -> None:
    app, zk = status_app(make_app)
    identifier = '<script>alert("x")</script> & co'
    with app.app_context(), zk.lock("report", identifier=identifier) as lock:
        token = lock.fencing_token
        answer = app.test_client().get("/zk/")
    assert answer.status_code == 200
    assert answer.content_type.startswith("text/html")
    page = answer.get_data(as_text=True)
    assert f'data-path="{LOCKS}/report"' in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; co" in page
    assert "<script>" not in page
    assert f'<td class="zk-number">{token}</td>' in page
    assert "CONNECTED" in page
    # Every server of the ensemble as it answered, this process's marked.
    table = page[page.index('<table class="zk-ensemble">') :]
    table = table[: table.index("</table>")]
    assert "<td>leader</td>" in table  # the harness's quorum of one
    assert "<td>&lt;- this process</td>" in table


def test_page_of_an_unreachable_ensemble_says_so(make_app: AppFactory) -> None:
    app, _ = status_app(make_app, ZK_RECIPES_HOSTS="127.0.0.1:9", ZK_RECIPES_CONNECTION_TIMEOUT=0.2)
    answer = app.test_client().get("/zk/")
    assert answer.status_code == 503
    page = answer.get_data(as_text=True)
    assert "not connected" in page
    assert "127.0.0.1:9" in page


def test_two_apps_of_one_extension_each_see_their_own_namespace(
    make_app: AppFactory, zk_namespace: str
) -> None:
    zk = ZkRecipes()
    apps = {}
    for name in ("a", "b"):
        app, _ = make_app(
            extension=zk, name=f"shop_{name}", ZK_RECIPES_NAMESPACE=f"{zk_namespace}/{name}"
        )
        app.register_blueprint(zk.status_blueprint(), url_prefix="/zk")
        apps[name] = app
    # Each lock is taken in its app's context: each with its app's client and namespace.
    with (
        apps["a"].app_context(),
        zk.lock("only-a"),
        apps["b"].app_context(),
        zk.lock("only-b"),
    ):
        pages = {name: app.test_client().get("/zk/") for name, app in apps.items()}
        sessions = {name: health(app)[1]["session_id"] for name, app in apps.items()}
    assert {name: page.status_code for name, page in pages.items()} == {"a": 200, "b": 200}
    page_a, page_b = (pages[n].get_data(as_text=True) for n in ("a", "b"))
    assert f"{LOCKS}/only-a" in page_a
    assert f"{LOCKS}/only-b" not in page_a
    assert f"{LOCKS}/only-b" in page_b
    assert f"{LOCKS}/only-a" not in page_b
    assert f"{zk_namespace}/a" in page_a
    assert sessions["a"] != sessions["b"]  # a client per app


def test_one_app_may_register_the_blueprint_twice_under_two_names(make_app: AppFactory) -> None:
    app, zk = make_app()
    app.register_blueprint(zk.status_blueprint(), url_prefix="/zk")
    app.register_blueprint(zk.status_blueprint("zk_ops"), url_prefix="/ops/zk")
    zk.get_client(app)
    client = app.test_client()
    assert client.get("/zk/health").status_code == 200
    assert client.get("/ops/zk/health").status_code == 200
    with app.test_request_context():
        assert url_for("zk_recipes_status.health") == "/zk/health"
        assert url_for("zk_ops.index") == "/ops/zk/"
    with pytest.raises(ConfigurationError, match=r"without dots"):
        zk.status_blueprint("zk.ops")
