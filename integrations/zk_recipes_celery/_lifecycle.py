"""One ZooKeeper client per process, tied to the worker's and beat's life.

- Worker main process: a bootstep connects at start-up (bounded by
  ``zk_recipes_connection_timeout``) and fails the start with the reason if
  the settings are wrong or the ensemble cannot be reached. A bootstep, not
  a signal handler: Celery logs and swallows exceptions raised by signal
  handlers, so a handler cannot stop a worker that would run unguarded.
- Prefork children: the client is made after the fork (``ProcessClient``
  checks the pid) and starts connecting in the background from
  ``worker_process_init``, which must return within Celery's few-second
  limit. A SIGTERM (``revoke(terminate=True)``, cold shutdown) closes the
  session before the child dies, so its locks go at once instead of at
  session expiry.
- Shutdown: ``worker_process_shutdown`` (children), ``worker_shutdown``
  (main process) and the beat scheduler's ``close()`` close the session, so
  ephemeral nodes vanish at once; ``ZkClient``'s ``atexit`` hook is the
  fallback. kill -9 leaves the nodes until the session times out.

The signal handlers here are connected by ``_hooks.install_once()``, never at
import: they are process-wide, connected once, and look up the app when they
fire (sentry-python's pattern).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import weakref
from collections.abc import Callable
from typing import Any

from billiard import current_process
from celery import bootsteps, current_app as _current_app

from zk_recipes import ClientSettings, ProcessClient, metrics
from zk_recipes_celery._config import CeleryZkConfig, read_config

log = logging.getLogger("zk_recipes.celery")


class AppState:
    """Per (Celery app): its configuration, read on first use, and its process client.

    What a process opens on the client for the app (a beat's seat in the
    election) registers its ``close`` with ``on_close``; ``close()`` runs
    those first, newest first, then closes the client. The state knows no
    tenant by name.
    """

    def __init__(self, app: Any) -> None:
        self._app_ref = weakref.ref(app)
        self._lock = threading.Lock()
        self._config: CeleryZkConfig | None = None
        #: The app's one client per process (made on first use, new after a fork).
        self.process_client = ProcessClient(self._client_settings)
        self._closers: list[Callable[[], object]] = []
        self._closers_lock = threading.Lock()

    @property
    def config(self) -> CeleryZkConfig:
        with self._lock:
            if self._config is None:
                app = self._app_ref()
                if app is None:  # pragma: no cover - the app owns us
                    raise RuntimeError("the Celery app is gone")
                self._config = read_config(app.conf, app_name=app.main)
                # Bounded metric labels for our own nodes (one lock per task key).
                metrics.path_template(self._config.singleton_root + "/**", "celery_singleton")
                metrics.path_template(self._config.prefix + "/beat/*", "celery_beat")
            return self._config

    def _client_settings(self) -> ClientSettings:
        return self.config.client

    def on_close(self, closer: Callable[[], object]) -> None:
        """Run ``closer`` when this state is closed, before its client is (once)."""
        with self._closers_lock:
            self._closers.append(closer)

    def close(self) -> None:
        """Close what was opened on the client, then the client: our ephemeral nodes go at once."""
        with self._closers_lock:
            closers, self._closers = self._closers[::-1], []
        for closer in closers:
            try:
                closer()
            except Exception:  # pragma: no cover - best effort at shutdown
                log.debug("closing %r failed", closer, exc_info=True)
        self.process_client.close()


_states: weakref.WeakKeyDictionary[Any, AppState] = weakref.WeakKeyDictionary()
_states_lock = threading.Lock()


def current_celery_app() -> Any:
    return _current_app._get_current_object()


def app_state(app: Any = None) -> AppState:
    app = current_celery_app() if app is None else app
    with _states_lock:
        state = _states.get(app)
        if state is None:
            state = _states[app] = AppState(app)
        return state


def existing_app_state(app: Any) -> AppState | None:
    """``app``'s state if this process made one (a hook on any app must not make one)."""
    with _states_lock:
        return _states.get(app)


def close_clients() -> None:
    """Close every client this process opened (our ephemeral nodes go at once)."""
    with _states_lock:
        states = list(_states.values())
    for state in states:
        state.close()


class ZkRecipesStep(bootsteps.StartStopStep):  # type: ignore[misc]
    """Worker bootstep: check the settings and connect before the worker takes tasks."""

    label = "zk-recipes"
    requires = ("celery.worker.components:Pool",)

    def start(self, worker: Any) -> None:
        state = app_state(worker.app)
        config = state.config  # ConfigurationError -> "Unrecoverable error", exit code 1
        if not config.check_on_start:
            return
        client = state.process_client.get()
        log.info(
            "zk-recipes: connected to ZooKeeper %s (session 0x%x, timeout %.1fs)",
            client.connect_string,
            client.session_id,
            client.negotiated_session_timeout or config.client.session_timeout,
        )

    def stop(self, worker: Any) -> None:
        close_clients()

    def terminate(self, worker: Any) -> None:
        close_clients()


def add_worker_step(app: Any) -> None:
    """Add the worker bootstep to ``app`` (idempotent)."""
    steps = app.steps["worker"]
    if ZkRecipesStep not in steps:
        steps.add(ZkRecipesStep)


def on_celeryd_init(sender: Any = None, instance: Any = None, **kwargs: Any) -> None:
    """A worker is being set up (its task modules are imported by now): give it our bootstep."""
    if instance is not None:
        add_worker_step(instance.app)


def on_worker_process_init(**kwargs: Any) -> None:
    state = app_state()
    try:
        state.config  # noqa: B018 - read now, log a bad setting in the child's log
    except Exception as exc:
        log.error("zk-recipes: %s", exc)
        return
    state.process_client.start_in_background()
    _close_session_on_sigterm()


def on_shutdown(**kwargs: Any) -> None:
    close_clients()


def _close_session_on_sigterm() -> None:
    """In a prefork child, let SIGTERM close our session before the child dies.

    Celery resets SIGTERM to the default action in its children, so a
    terminated task would keep its locks until the session expires. We close
    the session (bounded to 1 s), then die of SIGTERM exactly as before.
    """
    if current_process().name == "MainProcess":  # solo pool: SIGTERM is Celery's warm shutdown
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, frame: object) -> None:
        closer = threading.Thread(target=close_clients, name="zk-recipes close on SIGTERM")
        closer.daemon = True
        closer.start()
        closer.join(1.0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
