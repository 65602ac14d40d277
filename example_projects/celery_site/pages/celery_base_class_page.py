"""The base-class form of ``@singleton_task`` on docs/integrations/celery.md, run by the tests.

A task module of the page's app (``celery_page.py``): two runs of one account
at a time never overlap, the second waits for the first (``on_conflict="wait"``).
"""

# Celery is untyped: its decorators return Any.
# mypy: disallow-untyped-decorators=False

from __future__ import annotations

from _celery_stand_ins import sync
from celery_page import app

# --8<-- [start:singleton-task-base]
# given: app (your Celery app, as set up above), sync (your work)
from zk_recipes_celery import SingletonTask


@app.task(base=SingletonTask, singleton_key=["account_id"], singleton_on_conflict="wait")
def sync_account(account_id: int) -> None:
    sync(account_id)


# --8<-- [end:singleton-task-base]
