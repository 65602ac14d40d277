"""A singleton run whose lock is lost between the acquire and the body's start.

The session is expired on the server, from another thread, while the task's
thread is held in the ``singleton_acquired`` signal (sent once the lock is held,
just before the body): no sleep decides the interleaving. With ``on_lost="abort"``
the body must not start; with ``"flag"`` it starts and sees ``lost``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from celery import Celery

import zk_recipes_celery as zc
from zk_recipes import NoNodeError, RecipeUsageError, ZkClient
from zk_recipes.testing import expire_session, wait_until
from zk_recipes_celery import SingletonAborted, SingletonRun, SingletonTask, singleton_task


class _LoseBeforeTheBody:
    """While the run waits in ``singleton_acquired``, expire its session and wait for LOST."""

    def __init__(self, app: Celery, task_name: str) -> None:
        self.app = app
        self.task_name = task_name
        self.runs: list[SingletonRun] = []
        self.acquired = threading.Event()
        self.lost = threading.Event()
        self.failure: list[BaseException] = []
        self._expirer = threading.Thread(target=self._expire, name="expirer")

    def on_acquired(self, sender: Any = None, run: Any = None, **kwargs: Any) -> None:
        if getattr(sender, "name", None) != self.task_name:
            return
        self.runs.append(run)
        self.acquired.set()
        assert self.lost.wait(30), "the lock was never lost"  # holds the task's thread

    def _expire(self) -> None:
        try:
            assert self.acquired.wait(30), "the run never held its lock"
            expire_session(zc.get_client(self.app))
            wait_until(lambda: self.runs[0].lost, "the run's lock lost", timeout=20)
        except BaseException as exc:
            self.failure.append(exc)
        finally:
            self.lost.set()

    def __enter__(self) -> _LoseBeforeTheBody:
        zc.singleton_acquired.connect(self.on_acquired, weak=False)
        self._expirer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.acquired.set()  # let the expirer end if the run never got there
        self._expirer.join(30)
        zc.singleton_acquired.disconnect(self.on_acquired)
        assert self.failure == []


def _children(client: ZkClient, path: str) -> list[str]:
    try:
        return client.get_children(path)
    except NoNodeError:
        return []


# Task names are process-wide in Celery (shared tasks): one name per front door.
def _decorated(app: Celery, name: str, on_lost: Any, body: Callable[[], Any]) -> Any:
    @app.task(name=f"{name}.decorated")
    @singleton_task(on_lost=on_lost)
    def task() -> Any:
        return body()

    return task


def _base_class(app: Celery, name: str, on_lost: Any, body: Callable[[], Any]) -> Any:
    @app.task(name=f"{name}.base", base=SingletonTask, singleton_on_lost=on_lost)
    def task() -> Any:
        return body()

    return task


DOORS = {"@singleton_task": _decorated, "SingletonTask": _base_class}


@pytest.fixture(params=list(DOORS))
def make_task(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Each front door: the decorator and the base class (whose body is its ``run``)."""
    return DOORS[request.param]


def test_abort_a_run_whose_lock_is_lost_before_its_body_starts(
    app: Celery, zk_client: ZkClient, make_task: Callable[..., Any]
) -> None:
    started: list[bool] = []
    task = make_task(app, "t.lost_early", "abort", lambda: started.append(True))

    with _LoseBeforeTheBody(app, task.name) as loss, pytest.raises(SingletonAborted) as info:
        task()

    assert started == [], "the body must not start once the lock is gone"
    assert "before the task started" in str(info.value)
    assert loss.runs[0].lost
    with pytest.raises(RecipeUsageError):
        zc.current_singleton()  # reset after the aborted run
    assert _children(zk_client, f"/celery/singleton/{task.name}/task") == []
    # The next run takes the key on the new session, its body runs, nothing is left armed.
    assert task.apply().result is None
    assert started == [True]


def test_flag_a_run_whose_lock_is_lost_before_its_body_starts(
    app: Celery, make_task: Callable[..., Any]
) -> None:
    seen: list[bool] = []
    task = make_task(
        app, "t.flagged_early", "flag", lambda: seen.append(zc.current_singleton().lost)
    )

    with _LoseBeforeTheBody(app, task.name):
        task()

    assert seen == [True], "with on_lost='flag' the body runs and sees the loss"
