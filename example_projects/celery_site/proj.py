"""A Celery project using zk-recipes: one run per account at a time, one beat sending.

Run it with (``celery_demo.py`` beside it does all of this for you)::

    export REDIS_URL=redis://127.0.0.1:6379/0 ZK_HOSTS=127.0.0.1:2181 DEMO_LOG=/tmp/demo.jsonl
    celery -A proj worker -c 2        # on as many hosts as you like
    celery -A proj beat               # on two hosts: only the leader sends nightly_report

Both tasks append one JSON line to ``$DEMO_LOG`` per run, so the demo can check
what happened across every worker process.
"""
# Celery is untyped: its decorators return Any.
# mypy: disallow-untyped-decorators=False

from __future__ import annotations

import json

# --8<-- [start:app]
import os
import time
from typing import Any

from celery import Celery

from zk_recipes_celery import current_singleton, leader_only, singleton_task

app = Celery("proj", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
app.conf.broker_connection_retry_on_startup = True
app.conf.zk_recipes_hosts = os.environ["ZK_HOSTS"]
# How long ZooKeeper waits before it gives up on a silent process: a worker or
# beat killed with -9 keeps its lock or its leadership that long, no longer.
# Lower means faster failover but less tolerance for GC pauses and network blips.
app.conf.zk_recipes_session_timeout = 4.0

app.conf.beat_schedule = {
    # Every second, so the demo sees it: in real life a crontab(hour=2, minute=0).
    # Run `celery beat` on two hosts for availability; @leader_only on the task
    # makes sure only the elected beat sends it, so it runs once, not twice.
    "nightly-report": {"task": "proj.nightly_report", "schedule": 1.0},
}
# The alternative to marking tasks one by one: gate every entry of the schedule,
# so standby beats send nothing at all (and keep their schedule in step, so a
# standby that takes over does not fire a burst of "overdue" entries):
#
#     celery -A proj beat -S zk_recipes_celery.beat:LeaderScheduler
# --8<-- [end:app]


def _log(**fields: Any) -> None:
    """Append one JSON line to $DEMO_LOG.

    One os.write on an O_APPEND descriptor: lines written at the same moment by
    several worker processes do not interleave.
    """
    line = json.dumps({**fields, "pid": os.getpid()}) + "\n"
    fd = os.open(os.environ["DEMO_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


# --8<-- [start:tasks]
# given: _log (the demo's record of each run)
@app.task(bind=True)
# The lock is per account: two accounts sync side by side, a second sync of the
# same account while one runs is skipped (it would redo the same work) and
# returns "skipped" instead of the task's result.
@singleton_task(key=["account_id"], skip_result="skipped")
def sync_account(self: Any, account_id: int, seconds: float = 0.5) -> str:
    # The fencing token grows with every run of this account, cluster-wide. Hand
    # it to whatever you write to, so a store can refuse a write from a run that
    # lost its lock (e.g. a worker frozen past its session timeout).
    token = current_singleton().fencing_token
    start = time.time()
    time.sleep(seconds)  # the actual sync: calls to the account's API, writes, ...
    _log(task="sync_account", account=account_id, token=token, start=start, end=time.time())
    return "synced"


@app.task
@leader_only
def nightly_report() -> None:
    _log(task="nightly_report", t=time.time())


# --8<-- [end:tasks]
