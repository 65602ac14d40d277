"""``on_lost="flag"`` done right on docs/integrations/celery.md: check, then write with the token.

A task module of the page's app (``celery_page.py``); the test suite runs it on a
worker, and in its own process with the session expired between two batches.
"""

# Celery is untyped: its decorators return Any.
# mypy: disallow-untyped-decorators=False

from __future__ import annotations

from _celery_stand_ins import batches, store
from celery_page import app

# isort: split
# --8<-- [start:check-and-fence]
# given: app (your Celery app, as set up above)
# given: batches (your work, in parts), store (your storage: it refuses a stale token)
from celery import Task

from zk_recipes_celery import current_singleton, singleton_task


@app.task(bind=True)
@singleton_task(key=["account_id"])
def sync_account(self: Task, account_id: int) -> None:
    run = current_singleton()
    for batch in batches(account_id):
        run.check()  # LockLost if the session (and the lock) is gone
        store.write(batch, fencing_token=run.fencing_token)  # storage refuses a stale token


# --8<-- [end:check-and-fence]
