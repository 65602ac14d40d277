"""Publish dedup's queued markers, as stored: read, found by task id, cleared; no Celery needed.

Celery's ``@singleton_task(unique_on_publish=True)`` keeps one marker per
queued or running key (``zk_recipes_celery._publish`` makes them); the
``zk-recipes dedup`` commands and ``revoke()`` find and clear them here::

    <prefix>/queued/<task name, quoted>/<key>     data: {"id": task id, "task", "host", "pid", ...}

A marker is PERSISTENT (with a TTL where the server allows) while its task
waits in the queue, and an EPHEMERAL node of the worker's session once its
run has started, so that it goes with a worker killed -9 (``session_id``
tells which: 0 while queued).

Clearing is a read, then a delete at the version read, of a marker that
names the given task id only: a marker a later publish made is never
deleted by mistake for an earlier task of the same key.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.parse
from collections.abc import Collection
from typing import Any

from zk_recipes import BadVersionError, NoNodeError, ZkClient

#: The segment under the Celery integration's prefix where markers live.
QUEUED_SEGMENT = "queued"


def queued_root(prefix: str) -> str:
    """``<prefix>/queued``: the markers of every task of the app using ``prefix``."""
    return f"{prefix.rstrip('/')}/{QUEUED_SEGMENT}"


def marker_task_id(data: bytes) -> str:
    """The task id a queued marker names ("" when its data is not a marker's)."""
    try:
        found = json.loads(data)["id"]
    except (ValueError, KeyError, TypeError):
        return ""
    return str(found)


@dataclasses.dataclass(frozen=True)
class QueuedMarker:
    """One marker as read: which task it names, and whether its run has started."""

    #: The node's path (relative to the client's namespace).
    path: str
    #: The task's name (unquoted).
    task: str
    #: The key's segment: the SHA-256 of its arguments, or ``task`` for one key per name.
    key: str
    #: The task id publishes of this key are handed back.
    task_id: str
    #: Who wrote it: the publisher, then the worker running the task.
    host: str | None
    pid: int | None
    #: The session of the worker running the task (the node's ephemeralOwner); 0 while queued.
    session_id: int
    #: When it was last written (epoch seconds, the server's clock).
    written: float
    version: int
    czxid: int

    @property
    def running(self) -> bool:
        """True once a worker runs its task: the marker then goes with that worker's session."""
        return self.session_id != 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "task": self.task,
            "key": self.key,
            "task_id": self.task_id,
            "state": "running" if self.running else "queued",
            "host": self.host,
            "pid": self.pid,
            "session_id": self.session_id,
            "session_id_hex": f"{self.session_id:#x}",
            "written": self.written,
        }


def read_markers(
    client: ZkClient, root: str, *, task_ids: Collection[str] | None = None
) -> list[QueuedMarker]:
    """Every marker under ``root`` (``queued_root(prefix)``), or those naming ``task_ids``.

    Reads every marker: one listing per task name, one read per marker, pipelined.
    """
    timeout = client.settings.connection_timeout
    try:
        tasks = client.get_children(root)
    except NoNodeError:
        return []
    listings = [(task, client.get_children_async(f"{root}/{task}")) for task in sorted(tasks)]
    reads = []
    for task, listing in listings:
        try:
            keys = listing.result(timeout)
        except NoNodeError:  # a CONTAINER reaped meanwhile
            continue
        for key in sorted(keys):
            path = f"{root}/{task}/{key}"
            reads.append((task, key, path, client.get_async(path)))
    found = []
    for task, key, path, read in reads:
        try:
            data, stat = read.result(timeout)
        except NoNodeError:  # cleared meanwhile
            continue
        task_id = marker_task_id(data)
        if task_ids is not None and task_id not in task_ids:
            continue
        try:
            document = json.loads(data)
        except ValueError:
            document = {}
        pid = document.get("pid") if isinstance(document, dict) else None
        host = document.get("host") if isinstance(document, dict) else None
        found.append(
            QueuedMarker(
                path=path,
                task=urllib.parse.unquote(task),
                key=key,
                task_id=task_id,
                host=host if isinstance(host, str) else None,
                pid=pid if isinstance(pid, int) else None,
                session_id=stat.ephemeral_owner,
                written=stat.mtime / 1000.0,
                version=stat.version,
                czxid=stat.czxid,
            )
        )
    return found


def clear_marker(client: ZkClient, path: str, task_id: str, *, czxid: int | None = None) -> bool:
    """Delete the marker at ``path`` if it names ``task_id`` (and is node ``czxid``, if given).

    A read, then a delete at that version; True when deleted. A marker gone,
    or naming another task (a later publish's), is left alone: False.
    Connection errors are the client's.
    """
    try:
        data, stat = client.get(path)
        if marker_task_id(data) != task_id or (czxid is not None and stat.czxid != czxid):
            return False
        client.delete(path, version=stat.version)
    except (NoNodeError, BadVersionError):
        return False  # gone, or replaced by a later publish: not ours to delete
    return True
