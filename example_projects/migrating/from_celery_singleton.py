"""celery-singleton's README examples, ported to zk-recipes (docs/integrations/migrating.md).

Run by tests/integrations/celery/test_migration_examples.py with a worker:
``python -c "import from_celery_singleton as m; m.main()"``.
"""

# Celery is untyped: its decorators return Any.
# mypy: disallow-untyped-decorators=False

# The page shows each section with the imports it uses (E402).
# ruff: noqa: E402

from __future__ import annotations

import os

from celery import Celery

app = Celery("from_singleton", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
app.conf.zk_recipes_hosts = os.environ["ZK_HOSTS"]
app.conf.zk_recipes_namespace = os.environ.get("ZK_NAMESPACE", "")


# --8<-- [start:tasks]
# given: app (your Celery app, zk_recipes_hosts set)
import time

from zk_recipes_celery import singleton_task


# celery-singleton: @app.task(base=Singleton)
@app.task
@singleton_task(key=lambda *args, **kwargs: [args, kwargs], unique_on_publish=True)
def do_stuff(*args: object, **kwargs: object) -> str:
    time.sleep(2)
    return "I just woke up"


# celery-singleton: @app.task(base=Singleton, unique_on=["username"], raise_on_duplicate=True)
@app.task
@singleton_task(key=["username"], unique_on_publish=True, raise_on_duplicate=True)
def greet(username: str, greeting: str = "hello") -> str:
    time.sleep(1)
    return f"{greeting}, {username}"


# --8<-- [end:tasks]


# --8<-- [start:main]
# given: do_stuff, greet (the tasks above)
from zk_recipes_celery import DuplicateTask


def main() -> None:
    # Two calls with the same arguments: queued once, the same AsyncResult.
    async_result = do_stuff.delay(1, 2, 3, a="b")
    async_result2 = do_stuff.delay(1, 2, 3, a="b")
    assert async_result == async_result2
    assert async_result.get(timeout=30) == "I just woke up"

    # Only the named arguments count; a duplicate raises, naming the queued task.
    first = greet.delay("ada")
    try:
        greet.delay("ada", greeting="hi")
    except DuplicateTask as exc:
        if exc.task_id != first.id:
            raise AssertionError(f"{exc.task_id} is not the queued task") from exc
    else:
        raise AssertionError("a duplicate of greet was queued")
    assert first.get(timeout=30) == "hello, ada"
    # --8<-- [end:main]
    print("celery-singleton examples: ok")
