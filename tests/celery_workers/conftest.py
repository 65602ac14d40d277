"""Fixtures for Celery tests with real workers and a real Redis broker (see ``_harness.py``).

- ``redis_server`` (session): a ``redis-server`` on a free loopback port; ``.url``, ``.port``.
- ``redis_url``: ``<redis_server.url>/0``, flushed for each test.
- ``celery_project``: a :class:`CeleryProject` whose processes are stopped at
  teardown; when the test failed, the tail of each process's log is printed then
  (pytest shows it under "Captured stdout teardown").
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from zk_recipes.testing import HarnessError, RedisServer

from celery_workers._harness import SESSION_TIMEOUT, CeleryProject

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
        pytest.fail(f"{exc} (run `bash scripts/bootstrap.sh`)")
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


@pytest.fixture
def project(celery_project: CeleryProject, zk_hosts: str, zk_namespace: str) -> CeleryProject:
    """``celery_project`` whose apps read ZK_HOSTS, ZK_NAMESPACE and ZK_SESSION_TIMEOUT:
    this test's server and namespace, and SESSION_TIMEOUT unless a test overrides it."""
    celery_project.env["ZK_HOSTS"] = zk_hosts
    celery_project.env["ZK_NAMESPACE"] = zk_namespace
    celery_project.env["ZK_SESSION_TIMEOUT"] = str(SESSION_TIMEOUT)
    return celery_project
