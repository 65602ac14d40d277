"""``settings.ZK_RECIPES``, read once per alias and forgotten when the setting changes.

Why an accessor: Django settings can change under a running process in tests
(``override_settings``, pytest-django's ``settings`` fixture). Both send
``setting_changed``; ``forget`` (connected in ``AppConfig.ready``) drops what
was read, and the clients made from it (``_clients``), so the next use reads
the new value. Defaults are never written into ``settings``.

The shape is DATABASES': a dict of aliases, each a dict of upper-case keys
from the one table of settings (``zk_recipes.SETTINGS``, docs/settings.md)::

    ZK_RECIPES = {
        "default": {"HOSTS": "zk1:2181,zk2:2181,zk3:2181", "NAMESPACE": "shop"},
        "payments": {"HOSTS": "zk-pay:2181", "SESSION_TIMEOUT": 6},
    }
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from zk_recipes import ConfigurationError, RecipesConfig, Spelling, read_settings
from zk_recipes.frameworks import SERVICE_SETTING

DEFAULT_ALIAS = "default"
_EXAMPLE = 'ZK_RECIPES = {"default": {"HOSTS": "zk1:2181,zk2:2181,zk3:2181"}}'


class SettingsError(ConfigurationError, ImproperlyConfigured):  # type: ignore[misc]
    """``settings.ZK_RECIPES`` is missing or wrong; the message says how to write it.

    Both a ``zk_recipes.ConfigurationError`` and Django's ``ImproperlyConfigured``,
    so either ``except`` catches it.
    """


_lock = threading.Lock()
_configs: dict[str, RecipesConfig] = {}
_listeners: list[Callable[[], None]] = []


def raw() -> Mapping[str, Any]:
    """``settings.ZK_RECIPES`` as written; SettingsError when it is missing or not a dict."""
    value = getattr(settings, "ZK_RECIPES", None)
    if value is None:
        raise SettingsError(f"settings.ZK_RECIPES is not set: add {_EXAMPLE} to settings.py")
    if not isinstance(value, Mapping):
        raise SettingsError(
            f"settings.ZK_RECIPES must be a dict of aliases, like {_EXAMPLE}, "
            f"got {type(value).__name__}"
        )
    return value


def aliases() -> list[str]:
    """The aliases ``ZK_RECIPES`` names, "default" first."""
    names = [str(alias) for alias in raw()]
    return sorted(names, key=lambda alias: (alias != DEFAULT_ALIAS, alias))


def config(alias: str = DEFAULT_ALIAS) -> RecipesConfig:
    """The checked settings of ``alias``; SettingsError naming the key when one is wrong."""
    with _lock:
        found = _configs.get(alias)
    if found is not None:
        return found
    source = raw()
    try:
        found = read_settings(source, Spelling.DJANGO, alias=alias, extra=(SERVICE_SETTING,))
    except SettingsError:
        raise
    except ConfigurationError as exc:
        raise SettingsError(str(exc)) from None
    with _lock:
        return _configs.setdefault(alias, found)


def on_forget(listener: Callable[[], None]) -> None:
    """Call ``listener`` after the settings are forgotten (the clients close theirs)."""
    _listeners.append(listener)


def forget(*, setting: str = "ZK_RECIPES", **kwargs: object) -> None:
    """Drop what was read from ``ZK_RECIPES``; a ``setting_changed`` receiver."""
    if setting != "ZK_RECIPES":
        return
    with _lock:
        _configs.clear()
    for listener in list(_listeners):
        listener()


_uses: dict[str, list[str]] = {}


def note_use(alias: str, where: str) -> None:
    """Remember that ``where`` (a view, a command) uses ``alias``, for the system checks.

    Once per place: ``method_decorator`` decorates anew on every request.
    """
    with _lock:
        places = _uses.setdefault(alias, [])
        if where not in places:
            places.append(where)


def uses() -> dict[str, list[str]]:
    """Alias -> the places that use it, as noted by ``note_use``."""
    with _lock:
        return {alias: list(places) for alias, places in _uses.items()}
