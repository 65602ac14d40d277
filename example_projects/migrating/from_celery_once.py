"""celery-once's README examples, ported to zk-recipes (docs/integrations/migrating.md).

Run by tests/integrations/celery/test_migration_examples.py with a worker:
``python -c "import from_celery_once as m; m.main()"``.
"""

# Celery is untyped: its decorators return Any.
# mypy: disallow-untyped-decorators=False

# The page shows each section with the imports it uses (E402).
# ruff: noqa: E402

from __future__ import annotations

import os

from celery import Celery

app = Celery("from_once", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
app.conf.zk_recipes_hosts = os.environ["ZK_HOSTS"]
app.conf.zk_recipes_namespace = os.environ.get("ZK_NAMESPACE", "")


# --8<-- [start:tasks]
# given: app (your Celery app, zk_recipes_hosts set)
import time

from zk_recipes_celery import singleton_task


# celery-once: @app.task(base=QueueOnce)  (key: every argument; a duplicate raises AlreadyQueued)
@app.task
@singleton_task(
    key=lambda *args, **kwargs: [args, kwargs], unique_on_publish=True, raise_on_duplicate=True
)
def slow_task() -> str:
    time.sleep(2)
    return "Done!"


# celery-once: @app.task(base=QueueOnce, once={"keys": ["a"], "graceful": True, "timeout": 600})
@app.task
@singleton_task(key=["a"], unique_on_publish=True, publish_expiry=600)
def slow_add(a: int, b: int) -> int:
    time.sleep(1)
    return a + b


# --8<-- [end:tasks]


# --8<-- [start:main]
# given: slow_task, slow_add (the tasks above)
from zk_recipes_celery import DuplicateTask


def main() -> None:
    first = slow_task.delay()
    try:
        slow_task.delay()
    except DuplicateTask as exc:  # celery-once: AlreadyQueued
        if exc.task_id != first.id:
            raise AssertionError(f"{exc.task_id} is not the queued task") from exc
    else:
        raise AssertionError("a duplicate of slow_task was queued")
    assert first.get(timeout=30) == "Done!"

    # graceful: no exception; ours hands back the queued task's result (celery-once: None).
    queued = slow_add.delay(1, 1)
    again = slow_add.delay(1, 2)  # only "a" is the key: a duplicate
    assert again.id == queued.id
    assert again.get(timeout=30) == 2
    # --8<-- [end:main]
    print("celery-once examples: ok")
