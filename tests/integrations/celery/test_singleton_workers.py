"""@singleton_task on real workers (prefork, threads, solo) with a real Redis broker."""

from __future__ import annotations

import itertools
import os
import signal
import textwrap
import time

import pytest

from zk_recipes import NoNodeError, ZkClient
from zk_recipes.testing import wait_until
from zk_recipes_celery.testing import CeleryProject, Record

from ._common import SESSION_TIMEOUT

pytestmark = pytest.mark.slow


APP = textwrap.dedent(
    """
    import os
    import time

    from celery import Celery

    from zk_recipes_celery import current_singleton, singleton_task
    from zk_recipes_celery.testing import record

    app = Celery("proj", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
    app.conf.broker_connection_retry_on_startup = True
    app.conf.zk_recipes_hosts = os.environ["ZK_HOSTS"]
    app.conf.zk_recipes_namespace = os.environ["ZK_NAMESPACE"]
    app.conf.zk_recipes_session_timeout = float(os.environ.get("ZK_SESSION_TIMEOUT", "3"))
    app.conf.zk_recipes_connection_timeout = float(os.environ.get("ZK_CONNECT_TIMEOUT", "10"))
    app.conf.worker_prefetch_multiplier = 1


    @app.task(name="proj.exclusive")
    @singleton_task(skip_result="skipped")
    def exclusive(i, hold=0.15):
        run = current_singleton()
        record(task="exclusive", event="start", i=i, token=run.fencing_token)
        time.sleep(hold)
        record(task="exclusive", event="end", i=i, token=run.fencing_token)
        return "ran"


    @app.task(name="proj.long", bind=True, acks_late=True, reject_on_worker_lost=True)
    @singleton_task(key=["name"], on_conflict="wait", wait_timeout=30)
    def long(self, name, hold=60.0):
        run = current_singleton()
        earlier = [r for r in read() if r.get("task_id") == self.request.id]
        record(task="long", event="start", name=name, task_id=self.request.id,
               token=run.fencing_token, attempt=len(earlier))
        if not earlier:
            time.sleep(hold)
        record(task="long", event="end", name=name, task_id=self.request.id)
        return "done"


    @app.task(name="proj.retrying", bind=True)
    @singleton_task
    def retrying(self):
        run = current_singleton()
        record(task="retrying", event="start", retries=self.request.retries,
               token=run.fencing_token, task_id=self.request.id)
        if self.request.retries < 2:
            raise self.retry(countdown=0.1)
        return self.request.retries


    @app.task(name="proj.flaky", bind=True, autoretry_for=(ValueError,), max_retries=3,
              default_retry_delay=0.1)
    @singleton_task
    def flaky(self):
        record(task="flaky", event="start", retries=self.request.retries,
               token=current_singleton().fencing_token)
        if self.request.retries < 1:
            raise ValueError("first attempt fails")
        return "recovered"


    def read():
        import json
        try:
            with open(os.environ["RECORD_FILE"]) as f:
                return [json.loads(line) for line in f if line.endswith("\\n")]
        except FileNotFoundError:
            return []
    """
)


def _intervals(records: list[Record], task: str, key: str = "i") -> list[tuple[float, float, int]]:
    starts = {r[key]: r for r in records if r["task"] == task and r["event"] == "start"}
    ends = {r[key]: r for r in records if r["task"] == task and r["event"] == "end"}
    return sorted((starts[k]["t"], ends[k]["t"], starts[k]["token"]) for k in starts if k in ends)


def _lock_nodes(client: ZkClient, task: str) -> list[str]:
    # Every level is a CONTAINER the server may reap between two reads.
    root = f"/celery/singleton/{task}"
    try:
        keys = client.get_children(root)
    except NoNodeError:
        return []
    nodes: list[str] = []
    for key in keys:
        try:
            nodes += client.get_children(f"{root}/{key}")
        except NoNodeError:
            continue
    return nodes


@pytest.mark.parametrize(
    ("pool", "concurrency", "workers"),
    [("prefork", 2, 2), ("threads", 4, 1), ("solo", 1, 2)],
)
def test_concurrent_calls_never_overlap(
    project: CeleryProject, zk_client: ZkClient, pool: str, concurrency: int, workers: int
) -> None:
    module = project.write_app(APP)
    for n in range(workers):
        project.start_worker(module, pool=pool, concurrency=concurrency, name=f"w{n}")
    client = project.client_app()

    results = [client.send_task("proj.exclusive", args=(i,)) for i in range(20)]
    values = [r.get(timeout=30) for r in results]

    ran = values.count("ran")
    assert set(values) <= {"ran", "skipped"}
    assert ran >= 1
    assert values.count("skipped") == 20 - ran
    intervals = _intervals(project.read_records(), "exclusive")
    assert len(intervals) == ran
    for (_, end, token), (start, _, next_token) in itertools.pairwise(intervals):
        assert end <= start, f"two runs overlapped: {intervals}"
        assert token < next_token, "fencing tokens must increase run after run"
    assert _lock_nodes(zk_client, "proj.exclusive") == []


def test_kill_9_of_the_holder_frees_the_lock_at_session_expiry(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    module = project.write_app(APP)
    doomed = project.start_worker(module, name="doomed", concurrency=1)
    client = project.client_app()
    client.send_task("proj.long", args=("k",), kwargs={"hold": 60.0})
    project.wait_records(lambda rs: any(r["event"] == "start" for r in rs), timeout=20)
    assert len(_lock_nodes(zk_client, "proj.long")) == 1

    doomed.kill_group()
    killed_at = time.time()
    project.start_worker(module, name="survivor", concurrency=1)
    client.send_task("proj.long", args=("k",), kwargs={"hold": 0.0})
    records = project.wait_records(
        lambda rs: sum(r["event"] == "end" for r in rs) >= 1, timeout=SESSION_TIMEOUT * 4 + 10
    )

    second = [r for r in records if r["event"] == "start"][1]
    delay = second["t"] - killed_at
    print(f"after kill -9 the next run started {delay:.2f}s later (session {SESSION_TIMEOUT}s)")
    assert delay >= SESSION_TIMEOUT * 0.5, "the lock must outlive the dead holder's session"
    wait_until(lambda: _lock_nodes(zk_client, "proj.long") == [], "no lock node left behind")


def test_acks_late_redelivery_of_the_same_task_id_waits_for_the_dead_run(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    module = project.write_app(APP)
    project.start_worker(module, concurrency=1)
    client = project.client_app()
    result = client.send_task("proj.long", args=("redelivered",), kwargs={"hold": 60.0})
    first = project.wait_records(lambda rs: len(rs) >= 1, timeout=20)[0]

    os.kill(first["pid"], signal.SIGKILL)  # the prefork child dies holding the lock

    records = project.wait_records(
        lambda rs: any(r["event"] == "end" for r in rs), timeout=SESSION_TIMEOUT * 4 + 10
    )
    starts = [r for r in records if r["event"] == "start"]
    assert [s["task_id"] for s in starts] == [result.id, result.id]
    assert starts[1]["attempt"] == 1
    assert starts[1]["token"] > starts[0]["token"]
    assert result.get(timeout=10) == "done"
    wait_until(lambda: _lock_nodes(zk_client, "proj.long") == [], "no lock node left behind")


def test_self_retry_and_autoretry_release_and_take_again(project: CeleryProject) -> None:
    module = project.write_app(APP)
    project.start_worker(module)
    client = project.client_app()

    assert client.send_task("proj.retrying").get(timeout=30) == 2
    assert client.send_task("proj.flaky").get(timeout=30) == "recovered"

    records = project.read_records()
    retrying = [r for r in records if r["task"] == "retrying"]
    assert [r["retries"] for r in retrying] == [0, 1, 2]  # never skipped as its own duplicate
    tokens = [r["token"] for r in retrying]
    assert tokens == sorted(set(tokens)), "each attempt takes the lock anew"
    assert [r["retries"] for r in records if r["task"] == "flaky"] == [0, 1]


def test_revoke_terminate_releases_at_once(project: CeleryProject, zk_client: ZkClient) -> None:
    project.env["ZK_SESSION_TIMEOUT"] = "20"  # expiry would take 20 s: release must not wait for it
    module = project.write_app(APP)
    project.start_worker(module, concurrency=1)
    client = project.client_app()
    result = client.send_task("proj.long", args=("revoked",), kwargs={"hold": 60.0})
    project.wait_records(lambda rs: len(rs) >= 1, timeout=20)
    assert len(_lock_nodes(zk_client, "proj.long")) == 1

    client.control.revoke(result.id, terminate=True, signal="SIGTERM")

    wait_until(
        lambda: _lock_nodes(zk_client, "proj.long") == [],
        "the terminated run's lock node deleted",
        timeout=8.0,
    )


@pytest.mark.parametrize(
    ("hosts_env", "expected"),
    [
        ({"ZK_HOSTS": ""}, ["zk_recipes_hosts is not set"]),
        (
            {"ZK_HOSTS": "127.0.0.1:1", "ZK_CONNECT_TIMEOUT": "2"},
            # The cause and a hint, not "another thread's start() ... was still connecting".
            ["ConnectTimeoutError", "Connection refused", "Check that the servers are running"],
        ),
    ],
    ids=["no-hosts", "unreachable"],
)
def test_bad_configuration_fails_the_worker_start(
    project: CeleryProject, hosts_env: dict[str, str], expected: list[str]
) -> None:
    module = project.write_app(APP)
    worker = project.start_worker(module, env=hosts_env, wait_ready=False)

    code = worker.wait_exit(30)

    assert code != 0
    log = worker.log()
    assert all(part in log for part in expected), log
    assert "another thread" not in log
    assert "] Connection dropped" not in log, "kazoo's per-attempt lines are DEBUG"
    assert "Unrecoverable error" in log
