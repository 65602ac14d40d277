"""``ZK_RECIPES[alias]["SERVICE"]``: this process registered as an instance while it serves.

Django has no "the server is serving" signal, so the server's own hooks say
it: ``with_lifespan`` (ASGI) announces at start-up and withdraws at
shutdown; under gunicorn, ``zk_recipes_django.gunicorn``'s
``post_worker_init`` and ``worker_exit`` do (docs/integrations/django.md);
anything else calls ``announce()`` once it serves. ``close_all()`` withdraws
first, and ``atexit`` is the fallback. The kit's ``Announcement`` does the
work: in the background, per process, the node deleted at once.
"""

from __future__ import annotations

import functools
import threading

from zk_recipes import ZkClient
from zk_recipes.frameworks import Announcement, ServiceSpec
from zk_recipes_django import _clients, _settings

_lock = threading.Lock()
_announcements: dict[str, Announcement] = {}


def _client(alias: str) -> ZkClient:
    return _clients.get_client(alias)


def service_of(alias: str) -> ServiceSpec | None:
    spec = _settings.config(alias).extra.get("service")
    return spec if isinstance(spec, ServiceSpec) else None


def announce(alias: str | None = None) -> list[Announcement]:
    """Register this process for ``alias`` (default: every alias with a SERVICE); at once.

    Returns the announcements started (each registers in the background:
    ``.registered`` is set once its node exists). Idempotent per process.
    """
    started = []
    for name in [alias] if alias is not None else _settings.aliases():
        spec = service_of(name)
        if spec is None:
            continue
        with _lock:
            found = _announcements.get(name)
            if found is None or found.spec != spec:
                found = _announcements[name] = Announcement(spec, functools.partial(_client, name))
        found.start()
        started.append(found)
    return started


def withdraw_all() -> None:
    """Unregister every instance this process announced (their nodes deleted now)."""
    with _lock:
        found = list(_announcements.values())
        _announcements.clear()
    for announcement in found:
        announcement.stop()


_clients.on_close(withdraw_all)
