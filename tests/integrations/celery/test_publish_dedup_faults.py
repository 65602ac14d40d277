"""Publish dedup where it used to lose or block work: real Redis, real workers, real ZooKeeper.

- K1: a publish accepted after the run holding the key ended its body is
  not skipped by that run's lock, which may outlive the body a moment
  (the in-process tracer, with the release slowed, as in review 3's
  reproduction) or a run without a marker may hold (a real worker).
- M2: ``self.retry()`` is sent even when the key's marker names another task.
- Issue 35: a worker killed -9 mid-run frees its key within the session
  timeout, not ``publish_expiry``; ``revoke()`` clears the marker of a task
  no worker will ever see.
"""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

import zk_recipes_celery as zc
from zk_recipes import Lock, ZkClient
from zk_recipes.frameworks import QueuedMarker, read_markers
from zk_recipes.testing import wait_until
from zk_recipes_celery.testing import CeleryProject

from ._common import SESSION_TIMEOUT
from .test_publish_dedup import APP

pytestmark = pytest.mark.slow

#: ``proj.late_retry`` waits for GO_FILE before it retries: meanwhile the test replaces
#: its marker by another task's.
EXTRA = textwrap.dedent(
    """

    @app.task(name="proj.late_retry", bind=True, shared=False)
    @singleton_task(unique_on_publish=True)
    def late_retry(self):
        record(task="late_retry", event="start", retries=self.request.retries,
               task_id=self.request.id)
        if self.request.retries == 0:
            while not os.path.exists(os.environ["GO_FILE"]):
                time.sleep(0.05)
            raise self.retry(countdown=0.1)
        return self.request.retries
    """
)


@pytest.fixture
def proj(
    project: CeleryProject, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> Iterator[ModuleType]:
    """The app module (test_publish_dedup's, and ``late_retry``), imported here too."""
    name = f"dedup_faults_{os.getpid()}_{time.monotonic_ns()}"
    project.env["GO_FILE"] = str(tmp_path / "go")
    project.write_app(APP + EXTRA, module=name)
    for key, value in project.subprocess_env().items():
        if key in ("REDIS_URL", "ZK_HOSTS", "ZK_NAMESPACE", "ZK_SESSION_TIMEOUT", "RECORD_FILE"):
            monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(project.app_dir))
    module = importlib.import_module(name)
    try:
        yield module
    finally:
        zc.close_clients()
        module.app.close()
        sys.modules.pop(name, None)


def _markers(client: ZkClient, task: str) -> list[QueuedMarker]:
    return [m for m in read_markers(client, "/celery/queued") if m.task == task]


def test_a_publish_after_the_body_returned_runs_though_the_release_is_slow(
    zk_hosts: str, zk_namespace: str, zk_client: ZkClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 3's K1 reproduction as a test: Celery's tracer in-process, Lock.release slowed."""
    from celery import Celery
    from celery.app.trace import build_tracer

    from zk_recipes_celery import singleton_task

    app = Celery("k1", broker="memory://", backend="cache+memory://", set_as_current=False)
    app.conf.zk_recipes_hosts = zk_hosts
    app.conf.zk_recipes_namespace = zk_namespace
    app.conf.zk_recipes_session_timeout = SESSION_TIMEOUT
    ran: list[str] = []
    go = threading.Event()

    @app.task(name="k1.report", bind=True, shared=False)
    @singleton_task(key=["account"], unique_on_publish=True)
    def report(self: Any, account: str) -> str:
        ran.append(self.request.id)
        if len(ran) == 1:
            go.wait(10)
        return "done"

    app.finalize(auto=True)
    release = Lock.release

    def slow_release(self: Lock, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.5)  # a release that meets a blip, or a worker descheduled there
        return release(self, *args, **kwargs)

    monkeypatch.setattr(Lock, "release", slow_release)
    tracer = build_tracer(report.name, report, eager=False, app=app)
    outcomes: list[Any] = []

    def deliver(task_id: str) -> None:
        outcomes.append(tracer(task_id, ["acct-1"], {}, {"id": task_id, "delivery_info": {}}))

    try:
        first = report.apply_async(("acct-1",))
        worker1 = threading.Thread(target=deliver, args=(first.id,))
        worker1.start()
        wait_until(lambda: len(ran) == 1, "the first run's body runs")
        go.set()  # the body returns: the run lets its lock go, then clears its marker
        wait_until(lambda: not _markers(zk_client, "k1.report"), "the first marker is gone")
        second = report.apply_async(("acct-1",))  # after the body returned: runs again
        worker2 = threading.Thread(target=deliver, args=(second.id,))
        worker2.start()
        worker1.join(15)
        worker2.join(15)
    finally:
        zc.close_clients()
        app.close()
    assert second.id != first.id
    assert ran == [first.id, second.id], "the second publish was accepted: it must run"


def test_a_run_refused_by_a_run_without_a_marker_waits_instead_of_being_skipped(
    project: CeleryProject, proj: ModuleType
) -> None:
    project.start_worker(proj.__name__, concurrency=2)
    # send_task never reaches apply_async: that run has no marker, and holds the key.
    unmarked = project.client_app().send_task("proj.report", args=("k",), kwargs={"hold": 2})
    project.wait_records(lambda rs: any(r.get("account") == "k" for r in rs), timeout=20)
    published = proj.report.delay("k", hold=0)  # its marker names it: accepted
    assert published.get(timeout=30) == f"report k by {published.id}"
    assert unmarked.get(timeout=30) == f"report k by {unmarked.id}"
    starts = [r["task_id"] for r in project.read_records() if r.get("account") == "k"]
    assert starts == [unmarked.id, published.id]


def test_a_retry_is_sent_though_another_tasks_marker_replaced_its_own(
    project: CeleryProject, proj: ModuleType, zk_client: ZkClient, tmp_path: Any
) -> None:
    project.start_worker(proj.__name__, concurrency=1)
    first = proj.late_retry.delay()
    project.wait_records(lambda rs: any(r.get("task") == "late_retry" for r in rs), timeout=20)
    # Its marker expires (or is cleared by hand) while it runs; another publish makes its own.
    [marker] = _markers(zk_client, "proj.late_retry")
    zk_client.delete(marker.path)
    second = proj.late_retry.delay()
    assert second.id != first.id
    (tmp_path / "go").touch()  # first retries now, under its own id
    assert first.get(timeout=30) == 1, "its retry was sent and ran"
    assert second.get(timeout=30) == 1
    runs = [
        (r["task_id"], r["retries"]) for r in project.read_records() if r["task"] == "late_retry"
    ]
    assert (first.id, 1) in runs


def test_a_worker_killed_9_mid_run_frees_its_key_within_the_session_timeout(
    project: CeleryProject, proj: ModuleType, zk_client: ZkClient
) -> None:
    worker = project.start_worker(proj.__name__, concurrency=1)
    doomed = proj.report.delay("dead", hold=60)
    project.wait_records(lambda rs: any(r.get("account") == "dead" for r in rs), timeout=20)
    [marker] = _markers(zk_client, "proj.report")
    assert marker.running, "a started run's marker is bound to its worker's session"
    assert proj.report.delay("dead").id == doomed.id  # still running: deduplicated

    worker.kill_group()
    killed = time.monotonic()
    wait_until(lambda: not _markers(zk_client, "proj.report"), "the marker goes", timeout=20)
    freed = time.monotonic() - killed
    print(f"after kill -9 of the worker the key was free {freed:.2f}s later (session 3s)")
    assert freed <= SESSION_TIMEOUT * 2 + 1
    again = proj.report.delay("dead", hold=0)
    assert again.id != doomed.id
    project.start_worker(proj.__name__, concurrency=1, name="w2")
    assert again.get(timeout=30) == f"report dead by {again.id}"


def test_revoke_clears_the_marker_of_a_task_no_worker_will_see(
    project: CeleryProject, proj: ModuleType, zk_client: ZkClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The message is lost (never sent here): the marker names a task that will never run.
    monkeypatch.setattr(proj.app, "send_task", lambda *a, **k: None)
    proj.report.delay("lost")
    monkeypatch.undo()
    [marker] = _markers(zk_client, "proj.report")
    assert proj.report.delay("lost").id == marker.task_id  # blocked: deduplicated to it

    proj.report.AsyncResult(marker.task_id).revoke()
    assert _markers(zk_client, "proj.report") == []
    queued = proj.report.delay("lost", hold=0)
    assert queued.id != marker.task_id
    project.start_worker(proj.__name__, concurrency=1)
    assert queued.get(timeout=30) == f"report lost by {queued.id}"
