"""One ZooKeeper client per alias per process, made on first use, closed at exit.

Why lazily: ``AppConfig.ready()`` runs in every ``manage.py`` command, in
runserver's reloader parent and in a gunicorn master before it forks; a
session opened there would belong to the wrong process. ``ProcessClient``
makes the client in the process that first asks and makes a new one after a
fork (gunicorn ``--preload``, uWSGI without ``lazy-apps``), never touching the
parent's session. Not Django's per-thread connection handler: a session is a
process's, shared by its threads and its event loop.

Shutdown: ``ZkClient`` closes itself at interpreter exit (``atexit``), so
ephemeral nodes go at once on a normal exit. ``close_all()`` is for servers
whose workers end without running ``atexit`` (gunicorn's ``worker_exit``
hook, docs/integrations/django.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from zk_recipes import ProcessClient, ZkClient
from zk_recipes_django import _settings

_lock = threading.Lock()
_clients: dict[str, ProcessClient] = {}
#: Run by close_all() before the clients close (the announcements withdraw).
_before_close: list[Callable[[], None]] = []


def on_close(listener: Callable[[], None]) -> None:
    """Call ``listener`` at the start of every ``close_all()``."""
    _before_close.append(listener)


def process_client(alias: str = _settings.DEFAULT_ALIAS) -> ProcessClient:
    """The ``ProcessClient`` of ``alias``; reading its settings is deferred to first use."""
    with _lock:
        found = _clients.get(alias)
        if found is None:
            _settings.config(alias)  # an unknown alias fails here, naming the fix
            found = _clients[alias] = ProcessClient(lambda: _settings.config(alias).client)
        return found


def get_client(alias: str = _settings.DEFAULT_ALIAS, timeout: float | None = None) -> ZkClient:
    """The connected client of ``alias`` in this process, made and started on first use.

    Waits up to ``timeout`` (default: the alias's ``CONNECTION_TIMEOUT``) and
    raises ``ConnectTimeoutError`` naming the ensemble if it cannot connect.
    Thread-safe; blocking, so async code calls it through ``sync_to_async``
    or uses the async helpers of this package.
    """
    return process_client(alias).get(timeout)


def current_client(alias: str = _settings.DEFAULT_ALIAS) -> ZkClient | None:
    """The alias's client in this process if one was made, without making one (no I/O)."""
    with _lock:
        found = _clients.get(alias)
    return None if found is None else found.current()


def close_all() -> None:
    """Close every client of this process (their ephemeral nodes go at once). Idempotent.

    The instances this process announced are withdrawn first.
    """
    for listener in list(_before_close):
        listener()
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


_settings.on_forget(close_all)
