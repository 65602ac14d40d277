"""A singleton run partitioned from ZooKeeper hears LOST before anyone else can take its key.

Both directions of a one-way partition, with the run's client receiving watch
notifications throughout (nodes it watches are rewritten every 0.2 x the
session timeout), which used to push its LOST past the server's expiry.
``on_lost="flag"``: ``check()`` raises by the time a rival holds the key;
``on_lost="abort"``: the body was aborted before the rival got in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

import zk_recipes_celery as zc
from zk_recipes import Lock, LockLost, ZkClient
from zk_recipes.testing import TcpProxy, ZooKeeperServer
from zk_recipes_celery import SingletonAborted, singleton_task

SESSION = 3.0
WATCHED = 12


@pytest.fixture
def partitioned_app(
    zk_private_server: ZooKeeperServer, zk_proxy: TcpProxy, zk_namespace: str
) -> Iterator[Celery]:
    """An eager app whose ZooKeeper client goes through ``zk_proxy``."""
    app = Celery("p", broker="memory://", backend="cache+memory://", set_as_current=False)
    app.conf.task_always_eager = True
    app.conf.zk_recipes_hosts = zk_proxy.connect_string
    app.conf.zk_recipes_namespace = zk_namespace
    app.conf.zk_recipes_session_timeout = SESSION
    yield app
    zc.close_clients()
    app.close()


@pytest.mark.slow
@pytest.mark.parametrize("direction", ["drop_requests", "drop_replies"])
@pytest.mark.parametrize("on_lost", ["flag", "abort"])
def test_a_partitioned_run_hears_lost_before_a_rival_holds_its_key(
    direction: str,
    on_lost: Any,
    partitioned_app: Celery,
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_namespace: str,
) -> None:
    app = partitioned_app
    running = threading.Event()
    observed: dict[str, float] = {}
    failures: list[BaseException] = []

    @app.task(name=f"part.{direction}.{on_lost}")
    @singleton_task(on_lost=on_lost)
    def guarded() -> None:
        run = zc.current_singleton()
        running.set()
        try:
            # A body that never calls check(): abort must reach it. With "abort" the body
            # goes on after seeing ``lost`` (set just before the abort is raised in it), so
            # only an abort that never comes ends it, 5 s later, as a failure.
            gave_up = None
            while True:
                if run.lost:
                    if on_lost == "flag":
                        break
                    gave_up = gave_up or time.monotonic() + 5
                    if time.monotonic() > gave_up:
                        break
                time.sleep(0.005)
            observed["lost"] = time.monotonic()
        except SingletonAborted:
            observed["aborted"] = time.monotonic()
            raise

    with ZkClient(
        zk_private_server.connect_string, namespace=zk_namespace, session_timeout=SESSION
    ) as other:
        holder = zc.get_client(app)
        for index in range(WATCHED):
            other.create(f"/watched/{index}", b"0", parents=True)
            holder.get(f"/watched/{index}", watch=lambda _event: None)

        def run_task() -> None:
            try:
                guarded.apply().get()
            except BaseException as exc:  # the outcome is asserted below
                failures.append(exc)

        runner = threading.Thread(target=run_task)
        runner.start()
        assert running.wait(10)
        stop = threading.Event()

        def churn() -> None:
            index = 0
            while not stop.wait(0.2 * SESSION):
                other.set(f"/watched/{index % WATCHED}", str(index).encode())
                index += 1

        churner = threading.Thread(target=churn)
        getattr(zk_proxy, direction)()
        churner.start()
        try:
            rival = Lock(other, f"/celery/singleton/{guarded.name}/task")
            assert rival.acquire(timeout=6 * SESSION), "the server never let the rival in"
            rival_at = time.monotonic()
            runner.join(10)
            assert not runner.is_alive()
            rival.release()
        finally:
            stop.set()
            churner.join(10)
            zk_proxy.heal()
    if on_lost == "abort":
        assert observed.get("aborted", float("inf")) < rival_at, observed
        assert [type(exc) for exc in failures] == [SingletonAborted]
    else:
        assert observed.get("lost", float("inf")) < rival_at, observed
        assert failures == []


def test_check_raises_once_the_run_is_lost(app: Celery) -> None:
    # The flag and check() answer from the session's loss epoch: no listener lag.
    outcome: list[str] = []

    @app.task(name="part.check")
    @singleton_task()
    def guarded() -> None:
        run = zc.current_singleton()
        run.check()
        zc.get_client(app).close()  # ends every hold at once
        try:
            run.check()
        except LockLost:
            outcome.append("raised")
        outcome.append(f"lost={run.lost}")

    guarded.apply()
    assert outcome[0] == "raised"
