"""Test support for Celery code that uses zk-recipes: a real broker, real workers, real beats.

The Celery counterpart of ``zk_recipes.testing``: ``@singleton_task`` and beat HA
are about processes, so they are tested with real ``celery worker`` and
``celery beat`` processes against a real broker, never with mocks::

    # conftest.py
    pytest_plugins = [
        "zk_recipes.testing.pytest_plugin",         # zk_hosts, zk_namespace, zk_client, ...
        "zk_recipes_celery.testing.pytest_plugin",  # redis_server, redis_url, celery_project
    ]

    # test_jobs.py
    def test_one_run_at_a_time(celery_project, zk_hosts, zk_namespace):
        celery_project.env.update(ZK_HOSTS=zk_hosts, ZK_NAMESPACE=zk_namespace)
        module = celery_project.write_app(APP_SOURCE)   # reads REDIS_URL, ZK_HOSTS, ...
        celery_project.start_worker(module, pool="prefork", concurrency=2)
        celery_project.client_app().send_task("proj.sync", args=[42]).get(timeout=20)
        assert [r["event"] for r in celery_project.read_records()] == ["start", "end"]

- :class:`RedisServer`: a throwaway ``redis-server`` on a free loopback port.
- :class:`CeleryProject` and :class:`CeleryProcess`: app modules in a temporary
  directory, and the workers and beats started from them, stopped at the end.
- :func:`record`: called in a task, one JSON line the test reads back.

Needs the ``testing`` extra and Debian's ``redis-server`` (or ``$REDIS_SERVER``);
see docs/integrations/celery.md#testing.
"""

from __future__ import annotations

from zk_recipes.testing import HarnessError
from zk_recipes_celery.testing._project import (
    BEAT_READY,
    WORKER_READY,
    CeleryProcess,
    CeleryProject,
    Record,
)
from zk_recipes_celery.testing._record import record
from zk_recipes_celery.testing._redis import RedisServer, find_redis_server

__all__ = [
    "BEAT_READY",
    "WORKER_READY",
    "CeleryProcess",
    "CeleryProject",
    "HarnessError",
    "Record",
    "RedisServer",
    "find_redis_server",
    "record",
]
