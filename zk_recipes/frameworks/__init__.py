"""The framework kit: what every face of zk-recipes shares, for whoever writes the next one.

Django's ``@zk_lock`` and ``locked()``, Flask's ``@zk.locked`` and
``zk.lock()``, their status pages, Celery's singleton keys and the
``zk-recipes`` command are built from these parts; a face for another
framework (FastAPI, Pyramid, an RQ worker) needs only them and the public
``zk_recipes`` names. Each face passes in what differs (where the client
comes from, how a busy lock answers, where the held lock is shown); the
rest is here, once:

- **Names and paths.** ``lock_path(name, prefix)`` / ``leader_path``:
  ``<prefix>/locks/<name>``, the one directory every face uses for a lock
  called ``name``, so that ``zk-recipes lock X``, ``manage.py zklock X`` and
  ``@zk_lock("X")`` exclude each other; ``DEFAULT_PREFIX`` is the ``prefix``
  setting's default. ``LockNameTemplate`` names a decorated function's lock
  from its arguments (``"invoice-{pk}"``), each value quoted into one node
  name; ``bind_arguments`` / ``unknown_parameters`` are its binding of a
  call to a signature, shared with Celery's singleton keys.
- **Taking the lock of one call.** ``LockTarget``: the lock, its wait, and
  where the client comes from; ``acquire()`` for sync code (a ``Lock``),
  ``acquire_async()`` for async code (an ``aio.Lock`` waiting on the loop,
  no thread per waiter; a cancelled waiter leaves no node),
  ``release_lock_async``; ``HeldLock`` is either.
- **The decorated call and the block.** ``LockPlan`` + ``locked_call`` (hold,
  run, release in ``finally``; a busy answer from the face),
  ``LockedBlock`` (``with`` / ``async with``; ``lock_block``: a face's
  ``zk.lock(name)`` with its arguments checked), ``HeldLocks`` (the innermost
  held lock of this thread or task, for ``current_lock()``, and the warning
  when a lock was lost while a function held it), ``check_on_busy``,
  ``check_identifier``.
- **Outages.** ``UnavailableError`` is not "busy": ``on_unavailable``
  (``OnUnavailable``, ``check_on_unavailable``) picks a status (503 with
  ``Retry-After: RETRY_AFTER``), "raise", "run" (``ran_unguarded`` warns)
  or a callable, at once; ``LockTarget`` given the ``ProcessClient``
  never waits for a connection beyond a process's first second.
- **The front door.** ``require_version``: an integration's import refuses
  a framework older than it supports, naming the versions and the extra;
  ``parse_options``: a face's constructor options (``ZkRecipes(hosts=...)``),
  checked by canonical name when the face is made.
- **Announcing this process.** ``SERVICE_SETTING`` (read with
  ``read_settings(extra=...)``) and ``Announcement``: the instance of a
  service this process registers while it serves, in the background, per
  process, unregistered at shutdown (``atexit`` as the fallback).
- **A beat schedule held in ZooKeeper.** ``BeatSchedule`` (+ ``BeatEntry``,
  ``LastRun``, ``check_schedule``, ``check_dependencies``, ``crontab_schedule``,
  ``schedule_path``, ``ScheduleError``, ``InvalidEntry``, ``parse_entry``): the
  znodes and JSON of the schedule Celery's ``ZkScheduler`` reads, which the
  ``zk-recipes beat`` commands change, checked as Celery's scheduler parses it.
- **Publish dedup's queued markers.** ``read_markers`` (+ ``QueuedMarker``,
  ``queued_root``, ``marker_task_id``, ``clear_marker``): the markers Celery's
  ``unique_on_publish`` keeps, found by task id and cleared by ``revoke()`` and
  the ``zk-recipes dedup`` commands.
- **The ensemble.** ``ensemble_report`` (+ ``probe_server``, ``ensemble_rows``,
  ``ADMIN_PORT``): every server's role, zxid, load and config version
  (``zk-recipes ensemble``); ``ensemble_server_rows``: the same table from a
  ``connection_report``, for a status page.
- **Status pages.** ``connection_report`` (+ ``server_info``): the client's
  connection as plain data; ``health_report``: a health route's status and
  body, at once, without I/O; ``connection_rows`` / ``recipe_rows`` (+
  ``NodeRow``, ``RecipeRow``, ``spaced_hosts``): that report and
  ``zk_recipes.holders()`` as rows to render.

The kit imports the public ``zk_recipes`` names only, and no framework;
the faces import it (the ``zk-recipes`` command is one user of it).
docs/frameworks.md walks through a face built on it.
"""

from __future__ import annotations

from zk_recipes import DEFAULT_PREFIX as DEFAULT_PREFIX
from zk_recipes.frameworks._announcement import (
    SERVICE_SETTING as SERVICE_SETTING,
    Announcement as Announcement,
    ServiceSpec as ServiceSpec,
)
from zk_recipes.frameworks._beat_schedule import (
    BeatEntry as BeatEntry,
    BeatSchedule as BeatSchedule,
    InvalidEntry as InvalidEntry,
    LastRun as LastRun,
    ScheduleError as ScheduleError,
    check_dependencies as check_dependencies,
    check_schedule as check_schedule,
    crontab_schedule as crontab_schedule,
    parse_entry as parse_entry,
    schedule_path as schedule_path,
)
from zk_recipes.frameworks._connection_report import (
    HEALTH_KEYS as HEALTH_KEYS,
    connection_report as connection_report,
    health_report as health_report,
    server_info as server_info,
)
from zk_recipes.frameworks._ensemble_report import (
    ADMIN_PORT as ADMIN_PORT,
    AdminPorts as AdminPorts,
    ensemble_report as ensemble_report,
    ensemble_rows as ensemble_rows,
    ensemble_server_rows as ensemble_server_rows,
    probe_server as probe_server,
)
from zk_recipes.frameworks._lock_names import (
    LockNameTemplate as LockNameTemplate,
    bind_arguments as bind_arguments,
    qualified_name as qualified_name,
    unknown_parameters as unknown_parameters,
)
from zk_recipes.frameworks._lock_paths import (
    leader_path as leader_path,
    lock_path as lock_path,
)
from zk_recipes.frameworks._lock_target import (
    HeldLock as HeldLock,
    LockTarget as LockTarget,
    release_lock_async as release_lock_async,
)
from zk_recipes.frameworks._locked_blocks import (
    LockedBlock as LockedBlock,
    lock_block as lock_block,
)
from zk_recipes.frameworks._locked_calls import (
    RETRY_AFTER as RETRY_AFTER,
    Attach as Attach,
    HeldLocks as HeldLocks,
    Holding as Holding,
    LockPlan as LockPlan,
    OnUnavailable as OnUnavailable,
    check_identifier as check_identifier,
    check_on_busy as check_on_busy,
    check_on_unavailable as check_on_unavailable,
    locked_call as locked_call,
    ran_unguarded as ran_unguarded,
)
from zk_recipes.frameworks._options import parse_options as parse_options
from zk_recipes.frameworks._queued_markers import (
    QueuedMarker as QueuedMarker,
    clear_marker as clear_marker,
    marker_task_id as marker_task_id,
    queued_root as queued_root,
    read_markers as read_markers,
)
from zk_recipes.frameworks._status_rows import (
    NodeRow as NodeRow,
    RecipeRow as RecipeRow,
    connection_rows as connection_rows,
    recipe_rows as recipe_rows,
    spaced_hosts as spaced_hosts,
)
from zk_recipes.frameworks._versions import (
    require_version as require_version,
    version_tuple as version_tuple,
)

__all__ = [
    "ADMIN_PORT",
    "DEFAULT_PREFIX",
    "HEALTH_KEYS",
    "RETRY_AFTER",
    "SERVICE_SETTING",
    "AdminPorts",
    "Announcement",
    "Attach",
    "BeatEntry",
    "BeatSchedule",
    "HeldLock",
    "HeldLocks",
    "Holding",
    "InvalidEntry",
    "LastRun",
    "LockNameTemplate",
    "LockPlan",
    "LockTarget",
    "LockedBlock",
    "NodeRow",
    "OnUnavailable",
    "QueuedMarker",
    "RecipeRow",
    "ScheduleError",
    "ServiceSpec",
    "bind_arguments",
    "check_dependencies",
    "check_identifier",
    "check_on_busy",
    "check_on_unavailable",
    "check_schedule",
    "clear_marker",
    "connection_report",
    "connection_rows",
    "crontab_schedule",
    "ensemble_report",
    "ensemble_rows",
    "ensemble_server_rows",
    "health_report",
    "leader_path",
    "lock_block",
    "lock_path",
    "locked_call",
    "marker_task_id",
    "parse_entry",
    "parse_options",
    "probe_server",
    "qualified_name",
    "queued_root",
    "ran_unguarded",
    "read_markers",
    "recipe_rows",
    "release_lock_async",
    "require_version",
    "schedule_path",
    "server_info",
    "spaced_hosts",
    "unknown_parameters",
    "version_tuple",
]
