"""docs/integrations/celery.md's examples, as the page shows them, on a real worker.

The page includes its code from example_projects/celery_site/pages/: the app
(``celery_page``: the set-up and ``install(app)``), its task modules (the
base-class form, ``unique_on_publish``, check-and-fence), the schedule edits
and the testing example. One prefork worker runs every task module for the
whole file, on Redis and ZooKeeper; this process imports the same modules and
publishes, as an application would. The tasks' work is the stand-ins of
``_celery_stand_ins.py``: a store in Redis that refuses a stale fencing token,
and a sync that waits until the test lets it finish, so no test waits on a
clock. The testing example runs under pytest in a process of its own, with
the ``conftest.py`` the page shows.

Everything here shares one ZooKeeper namespace and one worker (module scope):
the page's app is imported once per process and reads its settings once.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from celery import signals
from celery.app.task import Task
from celery.beat import ScheduleEntry, Scheduler, Service
from celery.utils.dispatch import Signal

import zk_recipes_celery as zc
from zk_recipes import LeaderLatch, LockLost, NoNodeError, ZkClient
from zk_recipes.testing import expire_session, wait_for_children, wait_until
from zk_recipes.testing.pytest_plugin import TESTS_ROOT
from zk_recipes_celery._beat_election import BeatRole, beat_election
from zk_recipes_celery.testing import CeleryProcess, CeleryProject, Record, RedisServer

from ._common import ELECTION

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
PAGES = ROOT / "example_projects" / "celery_site" / "pages"
#: The environment the page's modules read, in the worker and in this process.
PAGE_ENV = ("REDIS_URL", "RECORD_FILE", "ZK_HOSTS", "ZK_NAMESPACE")


@dataclasses.dataclass(frozen=True)
class Pages:
    """The page's modules, imported in this process."""

    app: Any
    setup: ModuleType
    base_class: ModuleType
    publish: ModuleType
    fencing: ModuleType
    schedule: ModuleType
    stand_ins: ModuleType


@pytest.fixture(scope="module")
def namespace(zk_hosts: str) -> Iterator[str]:
    """The file's ZooKeeper namespace, deleted afterwards."""
    path = f"{TESTS_ROOT}/celery-page-{uuid.uuid4().hex[:8]}"
    with ZkClient(zk_hosts) as admin:
        admin.create(path, parents=True)
    yield path
    with ZkClient(zk_hosts) as admin:
        admin.delete(path, recursive=True)


@pytest.fixture(scope="module")
def zk(zk_hosts: str, namespace: str) -> Iterator[ZkClient]:
    with ZkClient(zk_hosts, namespace=namespace) as client:
        yield client


@pytest.fixture(scope="module")
def project(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    redis_server: RedisServer,
    zk_hosts: str,
    namespace: str,
) -> Iterator[CeleryProject]:
    """``celery_project`` for the whole file, running the page's modules where they are."""
    redis_server.flushall()
    project = CeleryProject(
        tmp_path_factory.mktemp("celery-page"), f"{redis_server.url}/0", app_dir=PAGES
    )
    project.env.update(ZK_HOSTS=zk_hosts, ZK_NAMESPACE=namespace)
    failed = request.session.testsfailed
    yield project
    try:
        project.close()
    finally:
        if request.session.testsfailed > failed and project.processes:
            print(project.logs_report())


@pytest.fixture(scope="module")
def pages(project: CeleryProject, namespace: str) -> Iterator[Pages]:
    """The page's modules, imported here on the file's Redis and ZooKeeper."""
    with pytest.MonkeyPatch.context() as patch:
        env = project.subprocess_env()
        for key in PAGE_ENV:
            patch.setenv(key, env[key])
        patch.syspath_prepend(str(PAGES))
        setup = importlib.import_module("celery_page")
        assert setup.app.conf.zk_recipes_namespace == namespace, (
            "celery_page was imported before, with another environment: the page's app "
            "reads its settings once per process"
        )
        found = Pages(
            app=setup.app,
            setup=setup,
            base_class=importlib.import_module("celery_base_class_page"),
            publish=importlib.import_module("celery_publish_page"),
            fencing=importlib.import_module("celery_fencing_page"),
            schedule=importlib.import_module("celery_schedule_page"),
            stand_ins=importlib.import_module("_celery_stand_ins"),
        )
        try:
            yield found
        finally:
            zc.close_clients()
            setup.app.close()


@pytest.fixture(scope="module")
def worker(project: CeleryProject, pages: Pages) -> CeleryProcess:
    """One worker for the file: ``celery -A celery_page worker``, two prefork children."""
    return project.start_worker("celery_page", pool="prefork", concurrency=2)


def _events(records: list[Record], task: Any, account: int) -> list[str]:
    return [r["event"] for r in records if r["task"] == task.name and r.get("account") == account]


def _children(client: ZkClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:  # a CONTAINER, reaped once empty
        return []


# --------------------------------------------------------------------------- set-up


def test_each_run_of_the_singleton_task_hands_its_fencing_token_to_storage(
    pages: Pages, worker: CeleryProcess
) -> None:
    task = pages.setup.sync_account
    store = pages.stand_ins.store

    task.delay(1).get(timeout=20)
    task.delay(1).get(timeout=20)

    writes = [w for w in store.writes() if w["data"] == 1]
    assert [w["task"] for w in writes] == [task.name, task.name]
    first, second = (w["token"] for w in writes)
    assert 0 < first < second, "the lock node's czxid grows with every run of the key"
    with pytest.raises(pages.stand_ins.StaleToken):
        store.write(1, fencing_token=first)  # a writer that lost the lock, late


def test_the_leader_only_task_is_sent_by_the_leader_beat_alone(
    pages: Pages, project: CeleryProject, worker: CeleryProcess, zk: ZkClient
) -> None:
    """Celery's own scheduler in this process is a beat of the page's app: while another
    candidate leads the election it drops nightly_report (and sends an entry of an ungated
    task); once this beat leads, it sends nightly_report and the worker runs it."""
    app = pages.app
    nightly, sync = pages.setup.nightly_report.name, pages.setup.sync_account.name
    published: list[str] = []
    dropped: list[str] = []

    def on_publish(sender: Any = None, **kwargs: Any) -> None:
        published.append(sender)

    def on_dropped(sender: Any = None, task: Any = None, **kwargs: Any) -> None:
        dropped.append(task)

    def beat(**tasks: tuple[str, tuple[Any, ...]]) -> Any:
        due_since = app.now() - datetime.timedelta(hours=2)
        schedule = {
            name: ScheduleEntry(
                name=name,
                task=task,
                args=args,
                schedule=datetime.timedelta(hours=1),
                last_run_at=due_since,
                app=app,
            )
            for name, (task, args) in tasks.items()
        }
        return Scheduler(app=app, lazy=True, schedule=schedule)

    def tick_until(scheduler: Any, done: Callable[[], object], what: str) -> None:
        try:
            wait_until(lambda: (scheduler.tick(), done())[1], what, timeout=20)
        finally:
            scheduler.close()

    signals.before_task_publish.connect(on_publish, weak=False)
    zc.beat_publish_dropped.connect(on_dropped, weak=False)
    try:
        other = LeaderLatch(zk, ELECTION, "another beat").start()
        try:
            assert other.await_leadership(10)
            standby = beat(**{"nightly-report": (nightly, ()), "sync-account": (sync, (5,))})
            tick_until(standby, lambda: dropped and published, "the standby handled both entries")
            assert dropped == [nightly], "a standby beat drops the leader-only entry"
            assert published == [sync], "and sends the others"
        finally:
            other.close()

        election = beat_election(app)
        wait_until(lambda: election.role() is BeatRole.LEADER, "this beat leads", timeout=20)
        leader = beat(**{"nightly-report": (nightly, ())})
        tick_until(leader, lambda: nightly in published, "nightly_report sent by the leader")
    finally:
        signals.before_task_publish.disconnect(on_publish)
        zc.beat_publish_dropped.disconnect(on_dropped)

    records = project.wait_records(lambda rs: any(r["task"] == nightly for r in rs))
    assert [r["event"] for r in records if r["task"] == nightly] == ["report"]
    wait_until(
        lambda: any(w["data"] == 5 for w in pages.stand_ins.store.writes()),
        "the ungated entry ran on the worker",
    )


def test_install_again_changes_nothing(pages: Pages, worker: CeleryProcess) -> None:
    def hooks() -> dict[str, Any]:
        return {
            "receivers": {
                name: len(signal.receivers)
                for name, signal in vars(signals).items()
                if isinstance(signal, Signal)
            },
            "wrapped": (Scheduler.is_due, Scheduler.apply_entry, Service.sync, Task.apply_async),
            "worker steps": len(pages.app.steps["worker"]),
        }

    installed = hooks()  # by importing celery_page, which calls install(app)
    zc.install(pages.app)
    zc.install(pages.app)
    assert hooks() == installed
    # The worker imported the same module: its start-up check ran once, and connected.
    assert worker.log().count("zk-recipes: connected to ZooKeeper") == 1


# --------------------------------------------------------------------------- @singleton_task


def test_the_base_class_form_waits_for_the_running_sync(
    pages: Pages, project: CeleryProject, worker: CeleryProcess, zk: ZkClient
) -> None:
    task = pages.base_class.sync_account
    first = task.delay(7)
    project.wait_records(lambda rs: _events(rs, task, 7) == ["start"])

    second = task.delay(7)
    # The second run, in the other child, queues behind the holder for the account's key.
    (key,) = wait_for_children(zk, f"/celery/singleton/{task.name}", 1)
    wait_for_children(zk, f"/celery/singleton/{task.name}/{key}", 2, timeout=20)
    assert _events(project.read_records(), task, 7) == ["start"]

    pages.stand_ins.release(7, runs=2)
    assert first.get(timeout=20) is None
    assert second.get(timeout=20) is None
    assert _events(project.read_records(), task, 7) == ["start", "end", "start", "end"]


def test_a_second_delay_of_a_queued_key_returns_the_first_result(
    pages: Pages, project: CeleryProject, worker: CeleryProcess, zk: ZkClient
) -> None:
    task = pages.publish.sync_account
    first = pages.publish.publish_twice()  # asserts that both .delay(42) have one id
    project.wait_records(lambda rs: _events(rs, task, 42) == ["start"])
    assert len(_children(zk, f"/celery/queued/{task.name}")) == 1

    pages.stand_ins.release(42)
    assert first.get(timeout=20) is None
    assert _children(zk, f"/celery/queued/{task.name}") == [], "cleared when the run ends"

    again = task.delay(42)  # the run is over: a new one is queued
    assert again.id != first.id
    pages.stand_ins.release(42)
    assert again.get(timeout=20) is None
    # Two runs, each let finish once: the second .delay() sent nothing.
    assert _events(project.read_records(), task, 42) == ["start", "end"] * 2


def test_a_run_checks_its_lock_and_writes_with_its_token(
    pages: Pages, worker: CeleryProcess
) -> None:
    task = pages.fencing.sync_account
    task.delay(3).get(timeout=20)

    writes = [w for w in pages.stand_ins.store.writes() if w["task"] == task.name]
    assert [w["data"] for w in writes] == list(pages.stand_ins.batches(3))
    assert len({w["token"] for w in writes}) == 1, "one run, one token"


def test_check_stops_a_run_whose_session_was_lost(
    pages: Pages, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same task called here (a direct call locks the same way): the session expires
    on the server between two batches, and check() stops the run before the second write."""
    task = pages.fencing.sync_account

    def batches_losing_the_session(account_id: int) -> Iterator[str]:
        yield f"account {account_id}, batch 0"
        expire_session(zc.get_client(pages.app))
        wait_until(lambda: zc.current_singleton().lost, "the run sees its lock lost", timeout=20)
        yield f"account {account_id}, batch 1"

    monkeypatch.setattr(pages.fencing, "batches", batches_losing_the_session)
    with pytest.raises(LockLost):
        task(4)

    written = [w["data"] for w in pages.stand_ins.store.writes() if "account 4," in str(w["data"])]
    assert written == ["account 4, batch 0"]


# --------------------------------------------------------------------------- ZkScheduler


def test_the_schedule_edits_land_in_zookeeper(pages: Pages, zk: ZkClient) -> None:
    assert pages.schedule.edit_schedule() == ["report"]

    entries = "/celery/schedule/proj/entries"
    assert zk.get_children(entries) == ["report"]
    stored = json.loads(zk.get(f"{entries}/report")[0])
    assert stored["task"] == "proj.report"
    assert stored["schedule"] == {"every": 300}
    assert stored["kwargs"] == {"region": "eu"}
    assert stored["enabled"] is True, "disabled, then enabled again"

    schedule = zc.beat_schedule(pages.app)
    schedule.disable("report")
    assert json.loads(zk.get(f"{entries}/report")[0])["enabled"] is False
    assert [(e.name, e.enabled) for e in schedule.entries()] == [("report", False)]


# --------------------------------------------------------------------------- testing


def test_the_testing_example_passes_with_its_conftest(zk_hosts: str, tmp_path: Path) -> None:
    """pytest on the example's test file: its conftest.py is the one the page shows."""
    argv = [
        sys.executable, "-m", "pytest", str(PAGES / "test_jobs_page.py"),
        "-q", "-p", "no:cacheprovider",
        f"--zk-hosts={zk_hosts}", f"--basetemp={tmp_path / 'run'}",
    ]  # fmt: skip
    done = subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
