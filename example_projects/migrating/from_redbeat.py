"""redbeat's README examples, ported to zk-recipes (docs/integrations/migrating.md).

Run by tests/integrations/celery/test_migration_examples.py with a worker and a
beat started with ``-S zk_recipes_celery.beat:ZkScheduler``:
``python -c "import from_redbeat as m; m.main()"``.
"""

# Celery is untyped: its decorators return Any.
# mypy: disallow-untyped-decorators=False

# The page shows each section with the imports it uses (E402).
# ruff: noqa: E402

from __future__ import annotations

import os
from collections.abc import Callable

from celery import Celery

app = Celery("from_redbeat", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
app.conf.zk_recipes_hosts = os.environ["ZK_HOSTS"]
app.conf.zk_recipes_namespace = os.environ.get("ZK_NAMESPACE", "")
# --8<-- [start:tasks]
# given: app (your Celery app, zk_recipes_hosts set)
# redbeat: app.conf.redbeat_redis_url = ...; beat -S redbeat.RedBeatScheduler
# ours: beat -S zk_recipes_celery.beat:ZkScheduler (the ensemble above is the store)
app.conf.beat_schedule = {"ping": {"task": "from_redbeat.add", "schedule": 1.0, "args": (0, 0)}}
# --8<-- [end:tasks]


@app.task(name="from_redbeat.add", ignore_result=True)
def add(x: int, y: int) -> None:
    with open(os.environ["RESULTS_FILE"], "a") as results:
        results.write(f"{x + y}\n")


# --8<-- [start:main]
# given: app (your Celery app), results (the sums add wrote), wait_for (polls a condition)
import time

from zk_recipes_celery import beat_schedule


def main() -> None:
    schedule = beat_schedule(app)
    # redbeat: e = RedBeatSchedulerEntry("thingo", "tasks.add", 10, args=[5, 6], app=app); e.save()
    schedule.add("thingo", "from_redbeat.add", 1.0, args=[5, 6])
    assert wait_for(lambda: "11" in results()), "thingo ran"
    # redbeat: e = RedBeatSchedulerEntry.from_key("redbeat:thingo", app=app); e.delete()
    assert schedule.remove("thingo")
    time.sleep(1.5)  # a run sent just before the removal may still land
    ran = results().count("11")
    time.sleep(2.5)
    assert results().count("11") == ran, "thingo stopped after its removal"
    assert [entry.name for entry in schedule.entries()] == ["ping"]
    # --8<-- [end:main]
    print("redbeat examples: ok")


def results() -> list[str]:
    try:
        with open(os.environ["RESULTS_FILE"]) as f:
            return f.read().split()
    except FileNotFoundError:
        return []


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
