"""The queued marker of publish-time deduplication, as a run sees it: whose it is, and its clearing.

``_publish`` makes markers when tasks are published; the run of the task a
marker names clears it when it ends (``_singleton_run``), or keeps it when
the task is retried under the same id; ``task_revoked`` clears it too.
"""

from __future__ import annotations

import json
import logging

from zk_recipes import BadVersionError, NoNodeError, ZkClient, ZkRecipesError

log = logging.getLogger("zk_recipes.celery.singleton")


class QueuedMarker:
    """The queued marker of a run (publish-time deduplication, ``_publish``), cleared once."""

    def __init__(self, client: ZkClient, path: str, task_id: str) -> None:
        self._client = client
        self._path = path
        self._task_id = task_id
        self._done = False

    def keep(self) -> None:
        """Leave it: the task is queued again under the same id (a retry)."""
        self._done = True

    def clear(self) -> None:
        """Delete it if it still names this task (once; later calls do nothing)."""
        if not self._done:
            self._done = True
            clear_marker(self._client, self._path, self._task_id)


def clear_marker(client: ZkClient, path: str, task_id: str) -> None:
    """Delete the marker at ``path`` if it names ``task_id`` (a get, then a versioned delete)."""
    try:
        data, stat = client.get(path)
        if marker_task_id(data) == task_id:
            client.delete(path, version=stat.version)
    except (NoNodeError, BadVersionError):
        return  # gone, or replaced by a later publish: not ours to delete
    except ZkRecipesError as exc:
        log.warning(
            "the queued marker %s of task %s could not be cleared (%s): publishes of its key "
            "are deduplicated until it expires",
            path,
            task_id,
            exc,
        )


def marker_task_id(data: bytes) -> str:
    """The task id a queued marker names ("" when its data is not ours)."""
    try:
        found = json.loads(data)["id"]
    except (ValueError, KeyError, TypeError):
        return ""
    return str(found)
