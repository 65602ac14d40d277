"""The ``project`` fixture: ``celery_project`` (zk_recipes_celery.testing) on this test's ZooKeeper.

The broker and process fixtures (``redis_server``, ``redis_url``, ``celery_project``)
come from ``zk_recipes_celery.testing.pytest_plugin``, registered in ``tests/conftest.py``.
"""

from __future__ import annotations

import pytest

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
