"""A Celery task of the shop: one run per customer at a time, on every worker."""
# Celery is untyped: its decorators return Any.
# mypy: disallow-untyped-decorators=False

from __future__ import annotations

from typing import Any

from celery import shared_task

from zk_recipes_celery import current_singleton, singleton_task


@shared_task
@singleton_task(key=["customer"])
def sync_customer(customer: str) -> dict[str, Any]:
    run = current_singleton()
    return {"customer": customer, "lock": run.key_path, "fencing_token": run.fencing_token}
