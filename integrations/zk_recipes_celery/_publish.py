"""Publish-time deduplication (``@singleton_task(unique_on_publish=True)``): a marker per key.

celery-singleton's contract on ZooKeeper: while a task of one key is queued
or running, publishing it again sends no message and hands back the first
task's ``AsyncResult`` (its id: ``.get()`` waits for that run), or raises
``DuplicateTask`` with ``raise_on_duplicate=True``. The run-time lock still
decides who runs; the marker only saves queue traffic and hands back
results. Off by default.

Znodes::

    <prefix>/queued/<task name>/<key>     PERSISTENT_WITH_TTL (ttl: publish_expiry)
                                          CONTAINER parents; data: JSON {"id": the
                                          queued task's id, "task", "host", "pid"}

``<key>`` is the run lock's (``_keys.key_segment``: the same arguments, the
same hash). A TTL node where the server allows them
(``zookeeper.extendedTypesEnabled=true``), so that a marker nobody clears
goes by itself; else a PERSISTENT one, said once per process, which the
next publish of its key replaces once expired (a key never published again
keeps its node: ``zk-recipes`` shows none of them as holders, they are
small, but they are there).

**Publish** (``Task.apply_async``, wrapped once per process by
``install_once``; an eager app publishes nothing and is left alone):

1. create the marker with the new task id. Made: send the message; a send
   that raises deletes the marker again and raises.
2. NodeExists: read it. The same task id (``self.retry()`` and
   ``autoretry_for`` publish the retry under the running task's id): send,
   the marker stays. Expired (``publish_expiry`` seconds past its last
   write, by the server's clock against ours): deleted at the version read,
   then 1 again. Otherwise a duplicate: no message.

One request for a first publish, two for a duplicate (create, read).

**Cleared** when the task's run ends, whatever the end but a retry (which
is queued again under the same id): returned, raised, skipped or refused
by the run lock, before the run lock is let go, so a publish once the body
has returned queues a new run. By ``task_revoked`` in the worker (revoked,
terminated, or expired by its ``expires``). Only by a run of the marker's
own task id: a get, then a delete at that version.

**Expires** after ``publish_expiry`` seconds (default one hour) when nobody
clears it: a publisher killed between the marker and the send, a message
the broker lost, a worker killed with -9 and no redelivery
(``acks_late`` off). Until then, publishes of the key get the dead task's
id, whose result never comes: set ``publish_expiry`` above the longest a
task can wait in the queue plus run, and no longer. The server removes an
expired TTL node at its next container check (``containerCheckIntervalMs``,
60 s by default), and a publish that meets one past its bound replaces it.

**Where a duplicate can still be queued**: ZooKeeper unreachable at
publish (the message is sent without a marker, logged and counted:
deduplication saves work, it must not stop it); ``app.send_task`` and
signatures sent by name (they never reach the task's ``apply_async``); a
publish between a marker's expiry and a late run of its task; a run whose
clearing failed (connection lost at its end) until the marker expires
stops duplicates it should have let through. In every case the run lock
still keeps two runs of one key from overlapping.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

from celery.app.task import Task

from zk_recipes import (
    BadVersionError,
    CreateMode,
    NodeExistsError,
    NoNodeError,
    UnsupportedFeatureError,
    ZkClient,
    ZkRecipesError,
)
from zk_recipes_celery import _metrics
from zk_recipes_celery._keys import key_segment
from zk_recipes_celery._lifecycle import app_state
from zk_recipes_celery._queued_marker import clear_marker, marker_task_id
from zk_recipes_celery._singleton_run import SingletonOptions, options_of

log = logging.getLogger("zk_recipes.celery.singleton")

#: Tries at the marker when it keeps changing under us (cleared, expired, made again).
_ATTEMPTS = 5

_patched = False
_ttl_refused = threading.Event()  # the server refused a TTL node: PERSISTENT from now on


class DuplicateTask(ZkRecipesError):
    """A publish met the queued marker of its key (``raise_on_duplicate=True``).

    ``task_id`` is the task already queued or running: ``AsyncResult(task_id)``.
    """

    def __init__(self, message: str, task_id: str) -> None:
        super().__init__(message)
        self.task_id = task_id


def marker_path(task: Any, options: SingletonOptions, args: tuple[Any, ...], kwargs: Any) -> str:
    """The queued marker of this call: ``<prefix>/queued/<task name>/<key>``."""
    config = app_state(task.app).config
    name = urllib.parse.quote(task.name, safe="")
    return f"{config.queued_root}/{name}/{key_segment(options.key, key_fn(task), args, kwargs)}"


def key_fn(task: Any) -> Callable[..., Any]:
    """The function whose signature binds a call's arguments (a bound task's ``self`` left out).

    ``autoretry_for`` replaces ``run`` with a wrapper of no signature and
    keeps the body as ``_orig_run``.
    """
    run: Callable[..., Any] = getattr(task, "_orig_run", None) or task.run
    return run


def patch_apply_async() -> None:
    """Wrap ``Task.apply_async`` once per process (called by ``install_once``, under its lock)."""
    global _patched
    if _patched:
        return
    original = Task.apply_async

    @functools.wraps(original)
    def apply_async(
        self: Any, args: Any = None, kwargs: Any = None, task_id: str | None = None, **options: Any
    ) -> Any:
        send = functools.partial(original, self, args, kwargs, **options)
        found = options_of(self)
        if found is None or not found.unique_on_publish or self.app.conf.task_always_eager:
            return send(task_id=task_id)
        return publish_once(self, found, tuple(args or ()), dict(kwargs or {}), task_id, send)

    Task.apply_async = apply_async
    _patched = True


def publish_once(
    task: Any,
    options: SingletonOptions,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    task_id: str | None,
    send: Callable[..., Any],
) -> Any:
    """Send the message unless the marker of its key names another task (see the module note)."""
    path = marker_path(task, options, args, kwargs)
    new_id = task_id or str(uuid.uuid4())
    try:
        client = app_state(task.app).process_client.get()
        marked = _mark(client, path, task.name, new_id, options.publish_expiry)
    except ZkRecipesError as exc:
        _metrics.count("publish_unmarked", task=task.name)
        log.warning(
            "singleton %s: publishing without deduplication, ZooKeeper did not answer (%s); "
            "the run lock still keeps runs of one key apart",
            task.name,
            exc,
        )
        return send(task_id=new_id)
    if isinstance(marked, int):  # our marker, at this version
        return _send_or_undo(client, path, marked, new_id, send)
    if marked == new_id:
        return send(task_id=new_id)  # a retry of the task the marker names
    if not marked:
        log.warning("the queued marker %s is not ours: not deduplicated", path)
        return send(task_id=new_id)
    _metrics.count("publish_deduplicated", task=task.name)
    if options.raise_on_duplicate:
        raise DuplicateTask(
            f"{task.name}: a task of this key is already queued or running "
            f"(task id {marked}, marker {path})",
            marked,
        )
    return task.AsyncResult(marked)


def _mark(client: ZkClient, path: str, task: str, task_id: str, expiry: float) -> int | str:
    """Our new marker's version, or the task id the marker already there names ("": not ours)."""
    for _attempt in range(_ATTEMPTS):
        try:
            return _create(client, path, task, task_id, expiry)
        except NodeExistsError:
            queued = _queued(client, path, expiry)
            if queued is not None:
                return queued
            # cleared or expired meanwhile: try to make it ours
    raise NodeExistsError(f"the queued marker {path} kept changing; not deduplicated", path)


def _send_or_undo(
    client: ZkClient, path: str, version: int, task_id: str, send: Callable[..., Any]
) -> Any:
    try:
        return send(task_id=task_id)
    except Exception:
        try:  # nothing was queued: the marker must not stop the next publish
            client.delete(path, version=version)
        except ZkRecipesError:
            log.warning("the queued marker %s of an unsent task stays until it expires", path)
        raise


def _create(client: ZkClient, path: str, task: str, task_id: str, expiry: float) -> int:
    data = json.dumps(
        {"id": task_id, "task": task, "host": socket.gethostname(), "pid": os.getpid()},
        separators=(",", ":"),
    ).encode()
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


def _queued(client: ZkClient, path: str, expiry: float) -> str | None:
    """The task id the marker names; None when it is gone, or expired (then deleted)."""
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return None
    if time.time() - stat.mtime / 1000.0 > expiry:
        with contextlib.suppress(NoNodeError, BadVersionError):  # cleared or replaced meanwhile
            client.delete(path, version=stat.version)
        return None
    return marker_task_id(data)


def on_task_revoked(sender: Any = None, request: Any = None, **_: Any) -> None:
    """``task_revoked`` (revoked, terminated, or expired by ``expires``): clear its marker."""
    options = options_of(sender) if sender is not None else None
    task_id = getattr(request, "id", None)
    if options is None or not options.unique_on_publish or task_id is None:
        return
    try:
        args = tuple(getattr(request, "args", None) or ())
        kwargs = dict(getattr(request, "kwargs", None) or {})
        path = marker_path(sender, options, args, kwargs)
        client = app_state(sender.app).process_client.get()
    except ZkRecipesError as exc:
        log.warning(
            "the queued marker of revoked task %s stays until it expires (%s)", task_id, exc
        )
        return
    clear_marker(client, path, task_id)
