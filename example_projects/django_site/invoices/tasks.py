"""The shop's Celery tasks: one sync per customer at a time, and a report one beat sends.

Both append a JSON line to ``$DEMO_LOG`` when it is set (the demo reads it to
check what happened across every worker process); otherwise they log nothing.
"""
# Celery is untyped: its decorators return Any.
# mypy: disallow-untyped-decorators=False

from __future__ import annotations

import json
import os

from zk_recipes_celery import leader_only

# isort: split
# --8<-- [start:sync_customer]
# given: _log (the demo's record of each run)
import time
from typing import Any

from celery import shared_task

from zk_recipes_celery import current_singleton, singleton_task


@shared_task
@singleton_task(key=["customer"])  # one sync per customer at a time
def sync_customer(customer: str, seconds: float = 0.0) -> dict[str, Any]:
    run = current_singleton()
    start = time.time()
    time.sleep(seconds)  # the actual sync: the customer's API, writes, ...
    _log(task="sync_customer", customer=customer, token=run.fencing_token, start=start)
    return {"customer": customer, "lock": run.key_path, "fencing_token": run.fencing_token}
    # --8<-- [end:sync_customer]


# Sent by the beat schedule (settings.CELERY_BEAT_SCHEDULE): with `celery beat` on two
# hosts for availability, @leader_only has only the elected beat send it.
@shared_task
@leader_only
def nightly_report() -> None:
    _log(task="nightly_report", t=time.time())


def _log(**fields: Any) -> None:
    """Append one JSON line to $DEMO_LOG, in one write (lines of several processes never mix)."""
    path = os.environ.get("DEMO_LOG")
    if not path:
        return
    line = json.dumps({**fields, "end": time.time(), "pid": os.getpid()}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
