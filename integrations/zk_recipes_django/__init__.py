"""zk-recipes for Django: settings, system checks, ``manage.py zklock``, ``@zk_lock`` and friends.

::

    INSTALLED_APPS += ["zk_recipes_django"]
    ZK_RECIPES = {"default": {"HOSTS": "zk1:2181,zk2:2181,zk3:2181", "NAMESPACE": "shop"}}

One ZooKeeper session per alias per process, made on first use (never in
``AppConfig.ready()``), new after a fork, closed at exit (``_clients``). See
docs/integrations/django.md.
"""

from __future__ import annotations

try:
    import django
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "zk_recipes_django needs Django: install it with pip install 'zk-recipes[django]'"
    ) from exc
else:  # the supported versions: the extra's pins (pyproject.toml)
    from zk_recipes.frameworks import require_version

    require_version("zk_recipes_django", "Django", django.VERSION, (4, 2), "django")

# The root of our nodes under the namespace: the command line's and every face's
# (one constant), so that ``zk-recipes lock NAME`` and ``manage.py zklock NAME``
# take the same lock.
from zk_recipes import DEFAULT_PREFIX
from zk_recipes_django._announcements import announce
from zk_recipes_django._clients import close_all, current_client, get_client
from zk_recipes_django._commands import LockedCommandMixin
from zk_recipes_django._settings import (
    DEFAULT_ALIAS,
    SettingsError,
    aliases,
    config,
)
from zk_recipes_django.locking import current_lock, locked, zk_lock

__all__ = [
    "DEFAULT_ALIAS",
    "DEFAULT_PREFIX",
    "LockedCommandMixin",
    "SettingsError",
    "aliases",
    "announce",
    "close_all",
    "config",
    "current_client",
    "current_lock",
    "get_client",
    "locked",
    "zk_lock",
]
