"""Publish-time deduplication (``unique_on_publish``) with a real Redis broker and real workers.

The publisher is this test process: the app module written for the workers
is imported here too, so ``.delay()`` goes through the same task objects.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import importlib
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
import redis

import zk_recipes_celery as zc
from zk_recipes import ConfigurationError, NoNodeError, ZkClient
from zk_recipes.testing import wait_until
from zk_recipes_celery import DuplicateTask, singleton_task
from zk_recipes_celery.testing import CeleryProject

pytestmark = pytest.mark.slow

APP = textwrap.dedent(
    """
    import os
    import time

    from celery import Celery

    from zk_recipes_celery import singleton_task
    from zk_recipes_celery.testing import record

    app = Celery("proj", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
    app.conf.broker_connection_retry_on_startup = True
    app.conf.zk_recipes_hosts = os.environ["ZK_HOSTS"]
    app.conf.zk_recipes_namespace = os.environ["ZK_NAMESPACE"]
    app.conf.zk_recipes_session_timeout = float(os.environ.get("ZK_SESSION_TIMEOUT", "3"))
    app.conf.worker_prefetch_multiplier = 1
    EXPIRY = float(os.environ.get("PUBLISH_EXPIRY", "60"))


    @app.task(name="proj.report", bind=True, shared=False)
    @singleton_task(key=["account"], unique_on_publish=True, publish_expiry=EXPIRY)
    def report(self, account, hold=0.5, fail=False):
        record(task="report", event="start", account=account, task_id=self.request.id)
        time.sleep(hold)
        if fail:
            raise ValueError("failed on purpose")
        return f"report {account} by {self.request.id}"


    @app.task(name="proj.strict", bind=True, shared=False)
    @singleton_task(unique_on_publish=True, raise_on_duplicate=True)
    def strict(self):
        return self.request.id


    @app.task(name="proj.retrying", bind=True, shared=False)
    @singleton_task(unique_on_publish=True)
    def retrying(self):
        record(task="retrying", event="start", retries=self.request.retries)
        if self.request.retries < 2:
            raise self.retry(countdown=0.1)
        return self.request.retries
    """
)


@pytest.fixture
def proj(project: CeleryProject, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The app module, imported in this process too (a module name of its own per test).

    Its tasks are ``shared=False``: Celery adds a shared task to every app
    finalized later in the process, and each test imports the module again.
    """
    name = f"dedup_{os.getpid()}_{time.monotonic_ns()}"
    project.write_app(APP, module=name)
    for key, value in project.subprocess_env().items():
        if key in ("REDIS_URL", "ZK_HOSTS", "ZK_NAMESPACE", "ZK_SESSION_TIMEOUT", "RECORD_FILE"):
            monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(project.app_dir))
    module = importlib.import_module(name)
    try:
        yield module
    finally:
        zc.close_clients()
        _close_result_backend(module.app)
        module.app.close()
        sys.modules.pop(name, None)
        # What this test's app left to the collector goes now, not in a later test's
        # set-up: a socket of Celery's, never closed by app.close(), warned there.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


def _close_result_backend(app: Any) -> None:
    """Close the Redis result backend's sockets: ``delay()`` subscribes to results.

    ``app.close()`` closes the broker's pool only; the backend's pub/sub
    connection, left to the garbage collector, warns of its socket in
    whichever later test the collection happens (an error in this suite).
    """
    backend = app.backend
    consumer = getattr(backend, "result_consumer", None)
    with contextlib.suppress(Exception):
        if consumer is not None:
            consumer.stop()
    with contextlib.suppress(Exception):
        backend.client.connection_pool.disconnect()


def _markers(client: ZkClient, task: str) -> list[str]:
    try:
        return client.get_children(f"/celery/queued/{task}")
    except NoNodeError:  # a CONTAINER, reaped once empty
        return []


def _queued_messages(project: CeleryProject) -> int:
    # Closed here: a client left to the garbage collector warns of its socket (an error
    # in this suite), in whichever test it happens to be collected.
    with redis.Redis.from_url(project.redis_url) as connection:
        return int(connection.llen("celery"))


def test_a_hundred_concurrent_delays_send_one_message_and_share_its_result(
    project: CeleryProject, proj: ModuleType, zk_client: ZkClient
) -> None:
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        results = list(pool.map(lambda _: proj.report.delay("acme"), range(100)))
    assert len({r.id for r in results}) == 1, "every caller gets the first task's id"
    assert _queued_messages(project) == 1, "one message reached the broker"
    assert len(_markers(zk_client, "proj.report")) == 1
    assert proj.report.delay("other").id != results[0].id  # another key queues its own

    project.start_worker(proj.__name__, concurrency=2)
    values = {r.get(timeout=30) for r in results}
    assert values == {f"report acme by {results[0].id}"}
    starts = [r for r in project.read_records() if r["account"] == "acme"]
    assert len(starts) == 1, "one run for the hundred calls"
    wait_until(lambda: _markers(zk_client, "proj.report") == [], "the markers cleared")
    # Once the run is over, the next publish queues a new task.
    again = proj.report.delay("acme", hold=0)
    assert again.id != results[0].id
    assert again.get(timeout=30) == f"report acme by {again.id}"


def test_the_marker_goes_after_a_failure_a_revoke_and_a_retry_keeps_it(
    project: CeleryProject, proj: ModuleType, zk_client: ZkClient
) -> None:
    project.start_worker(proj.__name__, concurrency=1)
    failed = proj.report.delay("f", hold=0, fail=True)
    with pytest.raises(ValueError, match="failed on purpose"):
        failed.get(timeout=30)
    wait_until(lambda: _markers(zk_client, "proj.report") == [], "cleared after a failure")

    running = proj.report.delay("r", hold=30)
    project.wait_records(lambda rs: any(r.get("account") == "r" for r in rs), timeout=20)
    assert proj.report.delay("r").id == running.id  # still running: deduplicated
    running.revoke(terminate=True)
    wait_until(lambda: _markers(zk_client, "proj.report") == [], "cleared after a revoke")
    assert proj.report.delay("r", hold=0).id != running.id

    retried = proj.retrying.delay()
    assert retried.get(timeout=30) == 2  # its own retries were not deduplicated away
    retries = [r["retries"] for r in project.read_records() if r["task"] == "retrying"]
    assert retries == [0, 1, 2]
    wait_until(lambda: _markers(zk_client, "proj.retrying") == [], "cleared after the last try")


def test_raise_on_duplicate_names_the_queued_task(proj: ModuleType) -> None:
    first = proj.strict.delay()
    with pytest.raises(DuplicateTask) as raised:
        proj.strict.delay()
    assert raised.value.task_id == first.id
    assert first.id in str(raised.value)


def test_a_send_that_fails_leaves_no_marker(
    proj: ModuleType, zk_client: ZkClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the broker is down")

    monkeypatch.setattr(proj.app, "send_task", refuse)
    with pytest.raises(OSError, match="the broker is down"):
        proj.report.delay("down")
    assert _markers(zk_client, "proj.report") == []


def test_a_publisher_killed_between_marker_and_send_blocks_its_key_until_the_expiry(
    project: CeleryProject, proj: ModuleType, zk_client: ZkClient
) -> None:
    dying = textwrap.dedent(
        f"""
        import os
        import {proj.__name__} as proj
        proj.app.send_task = lambda *a, **k: os._exit(9)  # dies after the marker, before sending
        proj.report.delay("dead")
        """
    )
    # 4 s: the server reaps a marker past its TTL, and under load a 2 s one was gone
    # before this test had read it.
    env = project.subprocess_env({"PUBLISH_EXPIRY": "4"})
    died = subprocess.run([sys.executable, "-c", dying], env=env, timeout=60, check=False)
    assert died.returncode == 9
    [marker] = _markers(zk_client, "proj.report")
    dead_id = _marker_id(zk_client, marker)
    _data, stat = zk_client.get(f"/celery/queued/proj.report/{marker}")

    # Within the bound the dead task's id comes back (the cost of the bound); after it,
    # a publish replaces the marker and queues. This process's tasks read EXPIRY=60, so
    # a publisher with PUBLISH_EXPIRY=4 does the rest.
    assert proj.report.delay("dead").id == dead_id
    # The bound itself is what is tested: no event marks its end (mtime: the server's clock,
    # this machine's)
    time.sleep(max(0.0, stat.mtime / 1000 + 4.2 - time.time()))
    after = textwrap.dedent(
        f"""
        import {proj.__name__} as proj
        from zk_recipes_celery import get_client
        new_id = proj.report.delay("dead", hold=0).id
        data, _stat = get_client(proj.app).get("/celery/queued/proj.report/{marker}")
        print(new_id, data.decode(), flush=True)  # read here: the marker lives 4 s
        """
    )
    queued = subprocess.run(
        [sys.executable, "-c", after], env=env, timeout=60, check=True, capture_output=True
    )
    new_id, marker_data = queued.stdout.decode().split()[-2:]
    assert new_id != dead_id
    assert json.loads(marker_data)["id"] == new_id
    project.start_worker(proj.__name__, concurrency=1)
    assert proj.report.AsyncResult(new_id).get(timeout=30) == f"report dead by {new_id}"


def _marker_id(client: ZkClient, key: str) -> str:
    data, _stat = client.get(f"/celery/queued/proj.report/{key}")
    found: str = json.loads(data)["id"]
    return found


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"raise_on_duplicate": True}, "needs unique_on_publish=True"),
        ({"unique_on_publish": True, "publish_expiry": 0}, "publish_expiry must be seconds > 0"),
        ({"unique_on_publish": "yes"}, "unique_on_publish must be True or False"),
    ],
)
def test_bad_options_are_refused_when_the_task_is_defined(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        singleton_task(**options)


def test_an_eager_app_publishes_nothing_and_makes_no_marker(app: Any, zk_client: ZkClient) -> None:
    @app.task(name="t.eager", bind=True)
    @singleton_task(unique_on_publish=True)
    def eager(self: Any) -> str:
        return str(self.request.id)

    first, second = eager.delay(), eager.delay()
    assert first.get() != second.get()  # both ran: nothing was queued to deduplicate
    assert _markers(zk_client, "t.eager") == []
