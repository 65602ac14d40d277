"""Every process-wide side effect of the integration, made once, on purpose, never at import.

Importing ``zk_recipes_celery`` changes nothing in Celery. ``install_once()``
connects our signal handlers (worker set-up, prefork child start and
shutdown, worker shutdown, beat start, task revoked) and wraps
``celery.beat.Scheduler.apply_entry``, ``celery.beat.Service.sync``,
``celery.app.task.Task.apply_async`` (publish-time deduplication: one
attribute read for a task without it) and ``celery.app.control.Control.revoke``
(clears the queued markers of revoked tasks: nothing for an app without a
``unique_on_publish`` task), under a module lock with a
done flag, so calling it again, from any thread, is harmless (sentry-python's
``setup_integrations`` and ``setup_once``). The hooks look up the app and its
settings when they fire, so one installation serves every app of the process.

It is reached from every door a user can come in by, before the hooks are needed:

- ``install(app)``, the explicit set-up;
- ``@singleton_task``, ``SingletonTask`` and ``@leader_only``, when the task is
  defined: a worker or beat imports task modules before it sends
  ``celeryd_init`` or starts its scheduler;
- ``LeaderScheduler`` / ``leader_gated``, when beat builds its scheduler, which
  is before ``beat_init`` and before ``Service.sync`` can run;
- ``get_client()``, and the bootstep and beat scheduler themselves.

A forked process (prefork children, the beat of ``worker -B``) inherits the
installation. A task marked only with ``@app.task(zk_leader_only=True)``, or an
app whose tasks use ``get_client()`` alone, needs ``install(app)``.
"""

from __future__ import annotations

import threading
from typing import Any

from celery import signals

from zk_recipes import ZkClient
from zk_recipes_celery import _beat_gate, _lifecycle, _publish

_install_lock = threading.Lock()
_installed = threading.Event()  # the done flag, read without the lock once set

#: (signal, handler, dispatch_uid): the uid keeps a second connection out even if
#: this module were loaded twice.
_SIGNAL_HANDLERS = (
    (signals.celeryd_init, _lifecycle.on_celeryd_init, "zk_recipes.celeryd_init"),
    (
        signals.worker_process_init,
        _lifecycle.on_worker_process_init,
        "zk_recipes.worker_process_init",
    ),
    (signals.worker_process_shutdown, _lifecycle.on_shutdown, "zk_recipes.worker_process_shutdown"),
    (signals.worker_shutdown, _lifecycle.on_shutdown, "zk_recipes.worker_shutdown"),
    (signals.beat_init, _beat_gate.on_beat_init, "zk_recipes.beat_init"),
    (signals.task_revoked, _publish.on_task_revoked, "zk_recipes.task_revoked"),
)


def install_once() -> None:
    """Connect the signal handlers and wrap beat's scheduler, once per process."""
    if _installed.is_set():  # the common case, without the lock
        return
    with _install_lock:
        if _installed.is_set():
            return
        for signal, handler, uid in _SIGNAL_HANDLERS:
            signal.connect(handler, weak=False, dispatch_uid=uid)
        _beat_gate.patch_scheduler()
        _publish.patch_apply_async()  # and revoke: no-ops for apps without unique_on_publish
        _installed.set()


def install(app: Any) -> None:
    """Set zk-recipes up for ``app``: the process-wide hooks and the worker bootstep.

    Idempotent. The decorators and ``LeaderScheduler`` install the hooks for you;
    call this where you create the app when nothing else of ours is imported
    before the worker starts (e.g. only ``@app.task(zk_leader_only=True)``).
    """
    install_once()
    _lifecycle.add_worker_step(app)


def get_client(app: Any = None, timeout: float | None = None) -> ZkClient:
    """This process's connected ZkClient for ``app`` (default: the current app).

    Created on first use in each process (never shared across fork), closed
    at worker/beat shutdown. Raises ConfigurationError for bad settings and
    ConnectTimeoutError if the ensemble cannot be reached within ``timeout``.
    """
    install_once()  # the shutdown hooks close it
    return _lifecycle.app_state(app).process_client.get(timeout)
