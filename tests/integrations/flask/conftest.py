"""The Flask tests: apps made by a factory on this test's ZooKeeper.

``make_app(**config)`` builds an app whose ``ZK_RECIPES_*`` config points at
this test's server and namespace (short session timeout), with the extension
initialised; every app's client is closed at the end of the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("flask")

from flask import Flask

from zk_recipes_flask import ZkRecipes

#: Session timeout of the tests' apps: short, for the expiry tests.
SESSION_TIMEOUT = 3.0

AppFactory = Callable[..., tuple[Flask, ZkRecipes]]


@pytest.fixture
def make_app(zk_hosts: str, zk_namespace: str) -> Iterator[AppFactory]:
    made: list[tuple[Flask, ZkRecipes]] = []

    def factory(
        extension: ZkRecipes | None = None, name: str = "shop", **config: Any
    ) -> tuple[Flask, ZkRecipes]:
        app = Flask(name)
        app.config.update(
            ZK_RECIPES_HOSTS=zk_hosts,
            ZK_RECIPES_NAMESPACE=zk_namespace,
            ZK_RECIPES_SESSION_TIMEOUT=SESSION_TIMEOUT,
        )
        app.config.update(config)
        zk = extension if extension is not None else ZkRecipes()
        zk.init_app(app)
        made.append((app, zk))
        return app, zk

    yield factory
    for app, zk in made:
        zk.close(app)
