"""The status report of the queues a process has open (``DistributedQueue.report``).

For the status pages and ``zk-recipes status``: each open queue's length,
claims, dead letters and the item in hand, read when asked (three reads per
queue with a lock path, one without; a queue that cannot be read says so).
"""

from __future__ import annotations

from typing import Any

from zk_recipes._client.client import ZkClient
from zk_recipes._errors import NoNodeError, ZkRecipesError


def report(client: ZkClient, opened: list[Any]) -> list[dict[str, Any]]:
    """The queues this process has open with ``client``: length, claims, the item in hand.

    For status pages (three reads per queue with a lock path: items, claims,
    dead letters; one without; a queue that cannot be read says so), and
    the items this process waits to try again (``retrying``). ``opened``: the
    process's open DistributedQueues (the class hands them over: this module
    does not import it).
    """
    found = []
    for queue in sorted(opened, key=lambda q: q.path):
        if queue.client is not client:
            continue
        entry: dict[str, Any] = {"path": queue.path, "consuming": queue._taker is not None}
        try:
            entry["items"] = len(queue._names())
            if queue.lock_path is not None:
                entry["claimed"] = len(client.get_children(queue.lock_path))
                try:
                    entry["dead"] = len(client.get_children(queue.path + "-dead"))
                except NoNodeError:
                    entry["dead"] = 0
        except ZkRecipesError as exc:
            entry["error"] = str(exc)
        taker = queue._taker
        running = taker.running if taker is not None else None
        entry["in_progress"] = running.path if running is not None else None
        #: Items this process keeps claimed until their next attempt (retrying.py).
        entry["retrying"] = len(taker.held) if taker is not None else 0
        found.append(entry)
    return found
