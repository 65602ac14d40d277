"""pytest fixtures for Celery tests with real workers and a real Redis broker.

Opt in from your top-level ``conftest.py`` (with ZooKeeper's plugin beside it)::

    pytest_plugins = [
        "zk_recipes.testing.pytest_plugin",
        "zk_recipes_celery.testing.pytest_plugin",
    ]

- ``redis_server`` (session): a :class:`RedisServer`; ``.url``, ``.port``.
- ``redis_url``: ``<redis_server.url>/0``, flushed before each test.
- ``celery_project``: a :class:`CeleryProject` in the test's ``tmp_path`` on
  ``redis_url``; its processes are stopped at teardown and, when the test
  failed, the tail of each process's log is printed then (pytest shows it under
  "Captured stdout teardown"): a worker's log is where a failure's reason is.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from zk_recipes.testing import HarnessError
from zk_recipes_celery.testing._project import CeleryProject
from zk_recipes_celery.testing._redis import RedisServer

_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
    return report


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    try:
        server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    except HarnessError as exc:
        pytest.fail(f"{exc} (Debian: apt-get install -y redis-server)")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    redis_server.flushall()
    return f"{redis_server.url}/0"


@pytest.fixture
def celery_project(
    request: pytest.FixtureRequest, tmp_path: Path, redis_url: str
) -> Iterator[CeleryProject]:
    project = CeleryProject(tmp_path / "celery", redis_url)
    yield project
    closed = False
    try:
        project.close()
        closed = True
    finally:
        if (not closed or request.node.stash.get(_FAILED, False)) and project.processes:
            print(project.logs_report())
