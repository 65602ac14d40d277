"""Stand-ins for the application code the tasks of docs/integrations/celery.md call.

The page's tasks call your storage and your work (``store.write(...)``,
``batches(...)``, ``sync(...)``, ``send_report()``). Here they are small and
real: they keep their state in Redis (``$REDIS_URL``, the broker's), so every
worker process and the test see the same, and each run says what it did with
``record()`` (``$RECORD_FILE``), for tests/integrations/celery/test_celery_page.py
to read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import redis
from celery import current_task

from zk_recipes_celery.testing import record

#: How long a run waits for the test to let it finish before it gives up.
RELEASE_TIMEOUT = 30


def _redis() -> redis.Redis:
    return redis.Redis.from_url(os.environ["REDIS_URL"])


def _task_name() -> str | None:
    """The running task's name; None outside a task (a write from the test itself)."""
    name = getattr(current_task, "name", None)
    return None if name is None else str(name)


class StaleToken(Exception):
    """A write carried an older fencing token than one the store has taken."""


class Store:
    """Storage that refuses a write whose fencing token is older than one it has taken.

    The highest token and the writes are in Redis, checked and written by one
    script, so the check holds across processes.
    """

    #: Returns 0 when the write is taken, else the higher token that refused it.
    _WRITE = """
    local highest = tonumber(redis.call('GET', KEYS[1]) or '0')
    if tonumber(ARGV[1]) < highest then return highest end
    redis.call('SET', KEYS[1], ARGV[1])
    redis.call('RPUSH', KEYS[2], ARGV[2])
    return 0
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, data: Any, fencing_token: int) -> None:
        entry = json.dumps({"data": data, "token": fencing_token, "task": _task_name()})
        with _redis() as client:
            refused: Any = client.eval(
                self._WRITE, 2, f"{self.name}:highest", f"{self.name}:writes", fencing_token, entry
            )
        if int(refused):
            raise StaleToken(f"{self.name}: token {fencing_token} is older than {int(refused)}")

    def writes(self) -> list[dict[str, Any]]:
        """Every write taken, oldest first: ``{"data", "token", "task"}``."""
        with _redis() as client:
            return [json.loads(entry) for entry in client.lrange(f"{self.name}:writes", 0, -1)]


store = Store("store:accounts")


def batches(account_id: int) -> Iterator[str]:
    """An account's work in pieces, each written on its own."""
    for number in range(3):
        yield f"account {account_id}, batch {number}"


def sync(account_id: int) -> None:
    """The sync itself: it records its start, then waits until the test lets it finish
    (``release(account_id)``), so that a test holds a run while another one contends."""
    record(task=_task_name(), event="start", account=account_id)
    with _redis() as client:
        if client.blpop([f"release:{account_id}"], timeout=RELEASE_TIMEOUT) is None:
            raise RuntimeError(f"the sync of account {account_id} was never let finish")
    record(task=_task_name(), event="end", account=account_id)


def release(account_id: int, runs: int = 1) -> None:
    """Let ``runs`` syncs of ``account_id`` finish (now, or as soon as they get there)."""
    with _redis() as client:
        client.rpush(f"release:{account_id}", *["go"] * runs)


def send_report() -> None:
    record(task=_task_name(), event="report")
