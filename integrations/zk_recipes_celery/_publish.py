"""Publish-time deduplication (``@singleton_task(unique_on_publish=True)``): a marker per key.

celery-singleton's contract on ZooKeeper: while a task of one key is queued
or running, publishing it again sends no message and hands back the first
task's ``AsyncResult`` (its id: ``.get()`` waits for that run), or raises
``DuplicateTask`` with ``raise_on_duplicate=True``. The run-time lock still
decides who runs; the marker only saves queue traffic and hands back
results. Off by default.

Znodes::

    <prefix>/queued/<task name>/<key>     PERSISTENT_WITH_TTL (ttl: publish_expiry) while
                                          queued, EPHEMERAL of the worker's session once
                                          its run starts; CONTAINER parents; data: JSON
                                          {"id": the task's id, "task", "host", "pid", "since"}

``<key>`` is the run lock's (``_keys.key_segment``: the same arguments, the
same hash). A TTL node where the server allows them
(``zookeeper.extendedTypesEnabled=true``), so that a marker nobody clears
goes by itself; else a PERSISTENT one, said once per process, which the
next publish of its key replaces once expired. ``zk-recipes holders`` and
the status pages show each marker (kind "celery queued") with its task id;
``zk-recipes dedup list|clear`` lists and clears them.

**Publish** (``Task.apply_async``, wrapped once per process by
``install_once``; an eager app publishes nothing and is left alone):

1. create the marker with the new task id. Made: send the message; a send
   that raises deletes the marker again and raises.
2. NodeExists: read it. The same task id: send, the marker stays.
   Expired (a queued marker ``publish_expiry`` seconds past its last write,
   by the server's clock against ours; a running one never expires, it
   lives with its worker's session): deleted at the version read, then 1
   again. Otherwise a duplicate: no message.
3. A retry (``self.retry()``, ``autoretry_for``: a publish under the id of
   the task running in this thread) is always sent, whatever the marker
   names: a marker of another task (published after this one's expired or
   was cleared) must not swallow it.

One request for a first publish, two for a duplicate (create, read).

**In the worker** (``_queued_marker``): the run binds the marker to its
worker's session as it starts, keeps it on a retry, and clears it when it
ends otherwise (returned, raised, skipped or refused by the run lock),
after the run lock is let go. So a worker killed -9 takes the marker with
its session, within the session timeout. ``task_revoked`` in the worker
(revoked, terminated, or expired by its ``expires``) clears it; so does
``revoke()`` (``app.control.revoke``, ``AsyncResult.revoke``, wrapped here):
it reads the app's markers and clears those naming the revoked ids, so a
task no worker holds (lost with its message, or whose worker is gone) stops
blocking its key at once.

**Expires** after ``publish_expiry`` seconds in the queue when nobody
clears it: a publisher killed between the marker and the send, a message
the broker lost, a worker killed before the run bound it. Until then,
publishes of the key get that task's id, whose result never comes: set
``publish_expiry`` above the longest a task can wait in the queue, and no
longer. The server removes an expired TTL node at its next container check
(``containerCheckIntervalMs``, 60 s by default), and a publish that meets
one past its bound replaces it.

**Where a duplicate can still be queued**: ZooKeeper unreachable at
publish (the message is sent without a marker, logged and counted:
deduplication saves work, it must not stop it); ``app.send_task`` and
signatures sent by name (they never reach the task's ``apply_async``); a
publish once a queued marker expired; a retry waiting in the queue whose
worker stopped meanwhile (the marker went with its session). In every case
the run lock still keeps two runs of one key from overlapping.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

from celery.app.control import Control
from celery.app.task import Task

from zk_recipes import BadVersionError, NodeExistsError, NoNodeError, ZkClient, ZkRecipesError
from zk_recipes.frameworks import clear_marker, marker_task_id, read_markers
from zk_recipes_celery import _metrics
from zk_recipes_celery._keys import key_segment
from zk_recipes_celery._lifecycle import app_state
from zk_recipes_celery._queued_marker import create_marker, marker_data
from zk_recipes_celery._singleton_options import SingletonOptions, options_of

log = logging.getLogger("zk_recipes.celery.singleton")

#: Tries at the marker when it keeps changing under us (cleared, expired, made again).
_ATTEMPTS = 5

#: How long a ``revoke()`` waits for this process's connection to clear markers (seconds).
REVOKE_CONNECT_TIMEOUT = 5.0

_patched = False


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
    """Wrap ``Task.apply_async`` and ``Control.revoke`` once per process (``install_once``)."""
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
    original_revoke = Control.revoke

    @functools.wraps(original_revoke)
    def revoke(self: Any, task_id: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original_revoke(self, task_id, *args, **kwargs)
        finally:
            ids = [task_id] if isinstance(task_id, str) else list(task_id or ())
            clear_revoked(self.app, [str(i) for i in ids])

    Control.revoke = revoke
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
    if _is_retry(task, task_id):
        log.info(
            "singleton %s: retry of task %s sent; the queued marker %s names task %s, "
            "published after this one's marker was gone",
            task.name,
            task_id,
            path,
            marked,
        )
        return send(task_id=new_id)
    _metrics.count("publish_deduplicated", task=task.name)
    if options.raise_on_duplicate:
        raise DuplicateTask(
            f"{task.name}: a task of this key is already queued or running "
            f"(task id {marked}, marker {path})",
            marked,
        )
    return task.AsyncResult(marked)


def _is_retry(task: Any, task_id: str | None) -> bool:
    """Whether this publish is a retry: under the id of the task this thread is running."""
    request = getattr(task, "request", None)
    return (
        task_id is not None
        and getattr(request, "id", None) == task_id
        and not getattr(request, "called_directly", True)
    )


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
    return create_marker(client, path, marker_data(task, task_id), expiry)


def _queued(client: ZkClient, path: str, expiry: float) -> str | None:
    """The task id the marker names; None when it is gone, or expired (then deleted).

    A marker bound to a worker's session (its run started) does not expire: it
    goes with that session.
    """
    try:
        data, stat = client.get(path)
    except NoNodeError:
        return None
    if not stat.ephemeral_owner and time.time() - stat.mtime / 1000.0 > expiry:
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
    with contextlib.suppress(ZkRecipesError):  # its run, or the revoke() call, clears it
        clear_marker(client, path, task_id)


def clear_revoked(app: Any, task_ids: list[str]) -> None:
    """After ``revoke()``: clear the markers naming ``task_ids`` (any task of ``app``).

    Only for an app with a ``unique_on_publish`` task registered. It reads
    every marker of the app (a listing per task name, a read per marker), so a
    task no worker will ever see revoked (its message lost, its worker gone)
    stops blocking its key now. Never raises: a revoke must not fail for this.
    """
    if not task_ids or not any(
        (found := options_of(task)) is not None and found.unique_on_publish
        for task in list(app.tasks.values())
    ):
        return
    try:
        state = app_state(app)
        client = state.process_client.get(REVOKE_CONNECT_TIMEOUT)
        for marker in read_markers(client, state.config.queued_root, task_ids=set(task_ids)):
            if clear_marker(client, marker.path, marker.task_id):
                log.info(
                    "revoke: cleared the queued marker %s of task %s", marker.path, marker.task_id
                )
    except ZkRecipesError as exc:
        log.warning(
            "revoke: the queued markers of %s stay until their runs clear them or they expire "
            "(%s); zk-recipes dedup clear TASK_ID clears one",
            ", ".join(task_ids),
            exc,
        )
