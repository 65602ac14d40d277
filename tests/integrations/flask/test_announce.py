"""``ZK_RECIPES_SERVICE``: a Flask app's process registered while it serves, gone at shutdown.

In process: ``zk.announce()`` registers in the background and ``zk.close()``
withdraws; the option and the config key agree; a bad value names the key.
As real processes: gunicorn with two workers and our hooks registers one
instance per worker, and its shutdown deletes them at once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from flask import Flask

from zk_recipes import ConfigurationError, RecipeUsageError, ServiceDiscovery, ZkClient
from zk_recipes.testing import free_ports, wait_until
from zk_recipes_flask import ZkRecipes, close_all

ROOT = Path(__file__).resolve().parents[3]
_GUNICORN = Path(sys.executable).parent / "gunicorn"


def _app(zk_hosts: str, zk_namespace: str, **config: object) -> Flask:
    app = Flask("shop")
    app.config.update(ZK_RECIPES_HOSTS=zk_hosts, ZK_RECIPES_NAMESPACE=zk_namespace, **config)
    return app


def test_announce_registers_in_the_background_and_close_withdraws(
    zk_hosts: str, zk_namespace: str, zk_client: ZkClient
) -> None:
    app = _app(zk_hosts, zk_namespace)
    zk = ZkRecipes(app, service={"name": "shop", "port": 5000, "id": "w1", "address": "h"})
    announcement = zk.announce(app)
    assert announcement.registered.wait(10)
    found = ServiceDiscovery(zk_client).query_for_instance("shop", "w1")
    assert found is not None
    assert (found.address, found.port) == ("h", 5000)
    assert zk.announce(app) is announcement  # idempotent in a process
    zk.close(app)
    assert zk_client.exists("/services/shop/w1") is None


def test_announce_as_the_page_writes_it_needs_no_app_context(
    zk_hosts: str, zk_namespace: str, zk_client: ZkClient
) -> None:
    """``zk = ZkRecipes(app)`` then ``zk.announce()`` where the process serves: the one app
    the extension serves is the one announced (it raised "no app context" before)."""
    app = _app(zk_hosts, zk_namespace, ZK_RECIPES_SERVICE={"NAME": "shop", "ID": "w2"})
    zk = ZkRecipes(app)
    announcement = zk.announce()
    assert announcement.registered.wait(10)
    assert zk_client.exists("/services/shop/w2") is not None
    zk.close()
    assert zk_client.exists("/services/shop/w2") is None
    two = ZkRecipes()
    # Both apps kept alive: the extension holds its apps weakly, and an app the cyclic
    # collector took in between would leave one served app, which announce() then uses.
    apps = [_app(zk_hosts, zk_namespace) for _ in range(2)]
    for app in apps:
        two.init_app(app)
    with pytest.raises(RecipeUsageError, match=r"pass the app: zk\.announce\(app\)"):
        two.announce()
    close_all()


def test_the_config_key_and_bad_values(zk_hosts: str, zk_namespace: str) -> None:
    app = _app(zk_hosts, zk_namespace, ZK_RECIPES_SERVICE={"NAME": "shop", "PORT": 1})
    zk = ZkRecipes(app)
    assert zk.state(app).announcement is not None
    with pytest.raises(ConfigurationError, match=r"ZK_RECIPES_SERVICE.*needs a NAME"):
        ZkRecipes(_app(zk_hosts, zk_namespace, ZK_RECIPES_SERVICE={"PORT": 1}))
    with pytest.raises(ConfigurationError, match=r"ZkRecipes\(service=...\)"):
        ZkRecipes(service={"NAME": "x", "PORT": "eighty"})
    plain = _app(zk_hosts, zk_namespace)
    with pytest.raises(RecipeUsageError, match="no service to announce"):
        ZkRecipes(plain).announce(plain)
    close_all()


@pytest.mark.skipif(not shutil.which(str(_GUNICORN)), reason="gunicorn is not installed")
def test_gunicorn_workers_announce_while_serving_and_withdraw_at_shutdown(
    zk_hosts: str, zk_namespace: str, zk_client: ZkClient
) -> None:
    (port,) = free_ports(1)
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "integrations")]),
        SHOP_ZK_HOSTS=zk_hosts,
        SHOP_ZK_NAMESPACE=zk_namespace,
        SHOP_ZK_SESSION_TIMEOUT="20",  # gone at once means deleted, not expired
        SHOP_ZK_SERVICE=json.dumps({"NAME": "shop", "PORT": port, "ADDRESS": "127.0.0.1"}),
    )
    server = subprocess.Popen(
        [
            str(_GUNICORN),
            "--workers=2",
            f"--bind=127.0.0.1:{port}",
            "--graceful-timeout=2",
            "--config=python:tests.integrations.flask.gunicorn_conf",
            "tests.integrations.flask.appsite:create_app()",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        discovery = ServiceDiscovery(zk_client)
        wait_until(lambda: len(discovery.query_for_instances("shop")) == 2, "two", timeout=30)
        server.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        server.wait(timeout=20)
        wait_until(lambda: discovery.query_for_instances("shop") == [], "withdrawn", timeout=10)
        assert time.monotonic() - stopped < 10
    finally:
        if server.poll() is None:
            server.kill()
        _, err = server.communicate()
        assert "Traceback" not in err, err


_FLASK_RUN = """
import sys
from flask import Flask
from zk_recipes_flask import ZkRecipes

app = Flask("shop")
app.config.update(
    ZK_RECIPES_HOSTS=sys.argv[1],
    ZK_RECIPES_NAMESPACE=sys.argv[2],
    ZK_RECIPES_SESSION_TIMEOUT=20,  # gone at once means withdrawn, not expired
    ZK_RECIPES_SERVICE={"NAME": "shop", "ID": "dev", "PORT": int(sys.argv[3])},
)
zk = ZkRecipes(app)
zk.announce()  # as the page writes it, where the process serves
app.run(port=int(sys.argv[3]))  # the dev server `flask run` starts, no reloader
"""


def test_sigterm_to_the_dev_server_withdraws_its_instance_at_once(
    zk_hosts: str, zk_namespace: str, zk_client: ZkClient
) -> None:
    """``flask run`` dies of SIGTERM at once: its instance stayed for the session timeout."""
    (port,) = free_ports(1)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "integrations")]))
    server = subprocess.Popen(
        [sys.executable, "-c", _FLASK_RUN, zk_hosts, zk_namespace, str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: zk_client.exists("/services/shop/dev") is not None, "registered", 20)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=10) == -signal.SIGTERM  # still dies of SIGTERM
        assert zk_client.exists("/services/shop/dev") is None  # withdrawn before it died
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate()
