"""``ZK_RECIPES["default"]["SERVICE"]``: the process registered while it serves, gone at shutdown.

In process: the ASGI lifespan announces at start-up and withdraws at
shutdown; a bad SERVICE is a settings error naming the key. As real
processes: gunicorn with two workers and our hooks registers one instance
per worker (one per host with PER_HOST), and its shutdown deletes them at
once, well before the session timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.asgi import get_asgi_application

import zk_recipes_django
from zk_recipes import ServiceDiscovery, ZkClient
from zk_recipes.testing import free_ports, wait_until
from zk_recipes_django.asgi import with_lifespan

from .conftest import ROOT, manage_env

SERVICE = {"NAME": "shop", "PORT": 8000, "ADDRESS": "10.0.0.1"}


def test_the_asgi_lifespan_announces_and_withdraws(
    zk_settings: dict[str, Any], zk_client: ZkClient
) -> None:
    zk_settings["SERVICE"] = dict(SERVICE, ID="asgi-1")
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
        await asyncio.get_running_loop().run_in_executor(
            None,
            lambda: wait_until(
                lambda: zk_client.exists("/services/shop/asgi-1") is not None, "announced"
            ),
        )
        found = ServiceDiscovery(zk_client).query_for_instance("shop", "asgi-1")
        assert found is not None
        assert (found.address, found.port) == ("10.0.0.1", 8000)
        await inbox.put({"type": "lifespan.shutdown"})
        await task

    asyncio.run(lifespan())
    assert zk_client.exists("/services/shop/asgi-1") is None  # deleted at shutdown


def test_a_bad_service_setting_names_the_key(zk_settings: dict[str, Any]) -> None:
    zk_settings["SERVICE"] = {"NAME": "shop", "PROT": 80}
    with pytest.raises(zk_recipes_django.SettingsError, match=r"SERVICE.*no key PROT"):
        zk_recipes_django.config()
    zk_settings["SERVICE"] = {"PORT": 80}
    with pytest.raises(zk_recipes_django.SettingsError, match="needs a NAME"):
        zk_recipes_django.config()


def test_no_service_announces_nothing(zk_settings: dict[str, Any]) -> None:
    assert zk_recipes_django.announce() == []


_GUNICORN = Path(sys.executable).parent / "gunicorn"


@pytest.mark.skipif(not shutil.which(str(_GUNICORN)), reason="gunicorn is not installed")
@pytest.mark.parametrize("per_host", [False, True])
def test_gunicorn_workers_announce_while_serving_and_withdraw_at_shutdown(
    per_host: bool, zk_hosts: str, zk_namespace: str, zk_client: ZkClient
) -> None:
    (port,) = free_ports(1)
    service = dict(SERVICE, PORT=port, PER_HOST=per_host)
    # A long session: gone at once means deleted, not expired.
    env = manage_env(zk_hosts, zk_namespace, ZK_SERVICE=json.dumps(service))
    env["ZK_SESSION_TIMEOUT"] = "20"
    server = subprocess.Popen(
        [
            str(_GUNICORN),
            "--workers=2",
            f"--bind=127.0.0.1:{port}",
            "--graceful-timeout=2",
            "--config=python:tests.integrations.django.site.gunicorn_conf",
            "tests.integrations.django.site.wsgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        expected = 1 if per_host else 2
        discovery = ServiceDiscovery(zk_client)
        wait_until(
            lambda: len(discovery.query_for_instances("shop")) == expected,
            f"{expected} instance(s) of shop",
            timeout=30,
        )
        owners = {zk_client.exists(f"/services/shop/{i.id}").ephemeral_owner  # type: ignore[union-attr]
                  for i in discovery.query_for_instances("shop")}  # fmt: skip
        assert len(owners) == expected  # one per worker (or one for the host)
        server.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        server.wait(timeout=20)
        wait_until(lambda: discovery.query_for_instances("shop") == [], "withdrawn", timeout=10)
        assert time.monotonic() - stopped < 10  # not the 20 s session timeout
    finally:
        if server.poll() is None:
            server.kill()
        _, err = server.communicate()
        assert "Traceback" not in err, err
    assert os.environ.get("ZK_SERVICE") is None
