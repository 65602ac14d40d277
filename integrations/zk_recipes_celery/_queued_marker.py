"""The queued marker of publish-time dedup, as a run sees it: bound to the run, then cleared.

``_publish`` makes markers when tasks are published (PERSISTENT, with a TTL
where the server allows); the run of the task a marker names:

- **binds** it to its worker's session as it starts (``bind``): one
  transaction deletes the persistent node at the version read and creates an
  EPHEMERAL one with the same name and the worker's ``host``/``pid``. From
  then on the marker lives as long as that worker does: a worker killed -9
  takes it with its session, within the session timeout, instead of leaving
  it to ``publish_expiry``; and a run longer than ``publish_expiry`` keeps it;
- **keeps** it when the task is retried under the same id (the retry is
  queued: the marker stays as it is, bound to this worker's session, and the
  retry's run binds it to its own);
- **clears** it when the run ends otherwise (``clear``), after the run lock
  is let go.

A marker that does not name this run's task id (a later publish's, after
this one's expired or was cleared) is never bound nor cleared by it.
``task_revoked``, ``revoke()`` and ``zk-recipes dedup clear`` clear markers
too (``zk_recipes.frameworks.clear_marker``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time

from zk_recipes import (
    ConnectionLostError,
    CreateMode,
    CreateResult,
    NoNodeError,
    SessionLost,
    TransactionFailedError,
    TransactionOutcomeUnknown,
    UnsupportedFeatureError,
    ZkClient,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes.frameworks import clear_marker, marker_task_id

log = logging.getLogger("zk_recipes.celery.singleton")

_ttl_refused = threading.Event()  # the server refused a TTL node: PERSISTENT from now on


def marker_data(task: str, task_id: str) -> bytes:
    """A marker's JSON: the task id, its name, and who wrote it (Owner fields, for holders)."""
    document = {
        "id": task_id,
        "task": task,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "since": round(time.time(), 3),
    }
    return json.dumps(document, separators=(",", ":")).encode()


def create_marker(client: ZkClient, path: str, data: bytes, expiry: float) -> int:
    """Create a queued marker (TTL ``expiry`` where the server allows); its version."""
    if not _ttl_refused.is_set():
        try:
            made = client.create(
                path, data, mode=CreateMode.PERSISTENT_WITH_TTL, ttl=expiry, parents=True
            )
            return made.stat.version
        except UnsupportedFeatureError:
            _ttl_refused.set()
            log.warning(
                "the ZooKeeper server refuses TTL nodes (zookeeper.extendedTypesEnabled is not "
                "true): queued markers are PERSISTENT, replaced by the next publish of their key "
                "once expired"
            )
    return client.create(path, data, parents=True).stat.version


class RunMarker:
    """The queued marker of one run: bound at its start, kept on a retry, else cleared once."""

    def __init__(self, client: ZkClient, path: str, task: str, task_id: str) -> None:
        self._client = client
        self._path = path
        self._task = task
        self._task_id = task_id
        #: The czxid of the node ``bind`` made (ours, on this session); None if not bound.
        self._bound: int | None = None
        self._done = False

    def bind(self) -> bool:
        """Bind the marker to this worker's session if it names this run; whether it does.

        False: there is none, or it names another task (a later publish's), or it
        could not be read; nothing is changed then.
        """
        client = self._client
        try:
            data, stat = client.get(self._path)
        except NoNodeError:
            return False
        except ZkRecipesError as exc:
            log.warning("the queued marker %s could not be read (%s)", self._path, exc)
            return False
        if marker_task_id(data) != self._task_id:
            return False
        if stat.ephemeral_owner == client.session_id:
            self._bound = stat.czxid  # this session bound it already (a retry run here)
            return True
        try:
            tx = client.transaction()
            tx.delete(self._path, stat.version)
            tx.create(self._path, marker_data(self._task, self._task_id), mode=CreateMode.EPHEMERAL)
            made = tx.commit()[1]
        except TransactionFailedError:
            return self._still_ours()  # changed meanwhile: cleared, or bound by a redelivery
        except TransactionOutcomeUnknown:
            self._still_ours()
            return True
        except ZkRecipesError as exc:
            log.warning(
                "the queued marker %s stays unbound (%s): if this worker dies, it blocks "
                "publishes of its key until publish_expiry",
                self._path,
                exc,
            )
            return True
        if isinstance(made, CreateResult):
            self._bound = made.stat.czxid
        return True

    def _still_ours(self) -> bool:
        """After a transaction that failed or went unanswered: is the marker ours, and bound?"""
        try:
            data, stat = self._client.get(self._path)
        except ZkRecipesError:
            return False
        if marker_task_id(data) != self._task_id:
            return False
        if stat.ephemeral_owner == self._client.session_id:
            self._bound = stat.czxid
        return True

    def keep(self) -> None:
        """Leave it: the task is queued again under the same id (a retry)."""
        self._done = True

    def clear(self) -> None:
        """Delete it if it still names this task (once; later calls do nothing)."""
        if self._done:
            return
        self._done = True
        try:
            clear_marker(self._client, self._path, self._task_id, czxid=self._bound)
        except (ConnectionLostError, ZkTimeoutError, SessionLost) as exc:
            if self._bound is not None:  # ours, on this worker's live session: delete it later
                self._client.delete(self._path, guaranteed=True, czxid=self._bound)
                return
            log.warning(
                "the queued marker %s of task %s could not be cleared (%s): publishes of its "
                "key are deduplicated until it expires",
                self._path,
                self._task_id,
                exc,
            )
        except ZkRecipesError as exc:
            log.warning(
                "the queued marker %s of task %s could not be cleared (%s): publishes of its "
                "key are deduplicated until it expires",
                self._path,
                self._task_id,
                exc,
            )
