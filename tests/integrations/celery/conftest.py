"""Fixtures of the Celery tests.

- ``app``: an eager in-process Celery app on this test's ZooKeeper (no broker).
- ``project``: ``celery_project`` on this test's ZooKeeper, for real workers.

The broker and process fixtures (``redis_server``, ``redis_url``, ``celery_project``)
come from ``zk_recipes_celery.testing.pytest_plugin``, registered in ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery import Celery, _state

import zk_recipes_celery as zc
from zk_recipes_celery.testing import CeleryProject

from ._common import SESSION_TIMEOUT


@pytest.fixture
def project(celery_project: CeleryProject, zk_hosts: str, zk_namespace: str) -> CeleryProject:
    """``celery_project`` whose apps read ZK_HOSTS, ZK_NAMESPACE and ZK_SESSION_TIMEOUT:
    this test's server and namespace, and SESSION_TIMEOUT unless a test overrides it."""
    celery_project.env["ZK_HOSTS"] = zk_hosts
    celery_project.env["ZK_NAMESPACE"] = zk_namespace
    celery_project.env["ZK_SESSION_TIMEOUT"] = str(SESSION_TIMEOUT)
    return celery_project


@pytest.fixture
def app(zk_hosts: str, zk_namespace: str) -> Iterator[Celery]:
    app = Celery("t", broker="memory://", backend="cache+memory://", set_as_current=False)
    app.conf.task_always_eager = True
    app.conf.zk_recipes_hosts = zk_hosts
    app.conf.zk_recipes_namespace = zk_namespace
    app.conf.zk_recipes_session_timeout = 3.0
    yield app
    zc.close_clients()
    app.close()
    # Concurrent eager calls race on Celery's global "inside a task" flag (each saves
    # and restores it), which can leave it set: reset it for the tests that follow.
    _state._set_task_join_will_block(False)
