"""Publish-time deduplication (``unique_on_publish``) on docs/integrations/celery.md.

A task module of the page's app (``celery_page.py``); ``publish_twice()`` is the
publisher's side, run by the test suite while a worker runs the task.
"""

# Celery is untyped: its decorators return Any.
# mypy: disallow-untyped-decorators=False

from __future__ import annotations

from typing import Any

from _celery_stand_ins import sync
from celery_page import app

# isort: split
# --8<-- [start:unique-on-publish]
# given: app (your Celery app, as set up above), sync (your work)
from celery import Task

from zk_recipes_celery import singleton_task


@app.task(bind=True)
@singleton_task(key=["account_id"], unique_on_publish=True, publish_expiry=900)
def sync_account(self: Task, account_id: int) -> None:
    sync(account_id)


# --8<-- [end:unique-on-publish]


def publish_twice() -> Any:
    """Publish account 42's sync twice while the first is queued or running; the first result."""
    # --8<-- [start:publish-twice]
    first = sync_account.delay(42)
    assert sync_account.delay(42).id == first.id  # no second message
    # --8<-- [end:publish-twice]
    return first
