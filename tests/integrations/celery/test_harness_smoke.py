"""The Celery harness itself, on plain Celery apps (no zk_recipes feature involved)."""

from __future__ import annotations

import textwrap

from zk_recipes_celery.testing import CeleryProject, Record

PLAIN_APP = textwrap.dedent(
    """
    import os

    from celery import Celery

    from zk_recipes_celery.testing import record

    app = Celery("proj", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
    app.conf.broker_connection_retry_on_startup = True
    app.conf.beat_schedule = {"tick": {"task": "proj.tick", "schedule": 1.0}}


    @app.task(name="proj.add")
    def add(x, y):
        record(task="add", x=x, y=y)
        return x + y


    @app.task(name="proj.tick")
    def tick():
        record(task="tick")
    """
)


def test_prefork_worker_runs_a_task(celery_project: CeleryProject) -> None:
    module = celery_project.write_app(PLAIN_APP)
    worker = celery_project.start_worker(module, pool="prefork", concurrency=2)

    result = celery_project.client_app().send_task("proj.add", args=(2, 3))

    assert result.get(timeout=20) == 5
    records = celery_project.read_records()
    assert [(r["task"], r["x"], r["y"]) for r in records] == [("add", 2, 3)]
    assert records[0]["pid"] != worker.pid  # ran in a prefork child, not the MainProcess


def test_beat_sends_scheduled_tasks_to_the_worker(celery_project: CeleryProject) -> None:
    module = celery_project.write_app(PLAIN_APP)
    celery_project.start_worker(module)
    celery_project.start_beat(module)

    def ticks(records: list[Record]) -> list[Record]:
        return [r for r in records if r["task"] == "tick"]

    records = celery_project.wait_records(lambda rs: len(ticks(rs)) >= 2, timeout=20)
    assert len(ticks(records)) >= 2


def test_worker_failing_at_import_exits_non_zero(celery_project: CeleryProject) -> None:
    module = celery_project.write_app('raise RuntimeError("boom")\n', module="broken")

    worker = celery_project.start_worker(module, wait_ready=False)

    assert worker.wait_exit(20) != 0
    assert "boom" in worker.log()
