"""System checks: ``ZK_RECIPES`` is checked before runserver, migrate and the rest.

Static checks (tag ``zk_recipes``) read the settings only; they never open a
connection, so CI without ZooKeeper stays green. The connectivity check is a
deploy check (``manage.py check --deploy``): it connects to each alias within
a few seconds and reports the session timeout the servers granted.

=====================  =========================================================
id                     fires when
=====================  =========================================================
``zk_recipes.E001``    ``ZK_RECIPES`` is not set
``zk_recipes.E002``    ``ZK_RECIPES``, or an alias in it, is not a dict; or it holds
                       settings without an alias around them (``{"HOSTS": ...}``)
``zk_recipes.E003``    an alias has no ``HOSTS``
``zk_recipes.E004``    a key is not a setting (a typo: "did you mean ...")
``zk_recipes.E005``    a value is of the wrong type or out of range
``zk_recipes.E006``    a timeout is wrong (``SESSION_TIMEOUT``, ``CONNECTION_TIMEOUT``,
                       ``SIMULATED_EXPIRY_FRACTION``)
``zk_recipes.E007``    ``RETRY`` names no retry policy, or wrong arguments
``zk_recipes.E008``    a ``@zk_lock`` / ``locked()`` / locked command names an alias
                       that ``ZK_RECIPES`` lacks
``zk_recipes.E009``    the settings of an alias contradict each other
``zk_recipes.W001``    there is no ``"default"`` alias (the commands' and decorators'
                       default)
``zk_recipes.E010``    deploy: an alias's ensemble cannot be reached in time
``zk_recipes.W002``    deploy: the servers granted another session timeout than asked
``zk_recipes.I001``    deploy: connected; the negotiated session timeout
=====================  =========================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.core import checks

from zk_recipes import (
    SETTINGS,
    ClientSettings,
    ConfigurationError,
    Spelling,
    ZkClient,
    ZkRecipesError,
    read_settings,
)
from zk_recipes.frameworks import SERVICE_SETTING
from zk_recipes_django import _settings

#: The longest the connectivity check waits for one alias.
CONNECT_CHECK_SECONDS = 5.0
_TIMEOUTS = frozenset({"session_timeout", "connection_timeout", "simulated_expiry_fraction"})
#: The settings an alias takes beyond the core's: SERVICE (discovery).
_EXTRA = (SERVICE_SETTING,)
_NAMES = frozenset(setting.name for setting in (*SETTINGS, *_EXTRA))
_PLACEHOLDER_HOSTS = "127.0.0.1:2181"


def _error(id_: int, msg: str, hint: str | None = None) -> checks.CheckMessage:
    return checks.Error(msg, hint=hint, obj="settings.ZK_RECIPES", id=f"zk_recipes.E{id_:03d}")


def check_settings(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """The static checks: every alias of ``ZK_RECIPES``, key by key, without I/O."""
    from django.conf import settings

    value = getattr(settings, "ZK_RECIPES", None)
    if value is None:
        return [
            _error(
                1,
                "settings.ZK_RECIPES is not set.",
                'Add ZK_RECIPES = {"default": {"HOSTS": "zk1:2181,zk2:2181,zk3:2181"}} '
                "to settings.py (docs/integrations/django.md).",
            )
        ]
    if not isinstance(value, Mapping):
        return [
            _error(
                2,
                f"settings.ZK_RECIPES must be a dict of aliases, got {type(value).__name__}.",
                'Write it like DATABASES: ZK_RECIPES = {"default": {"HOSTS": "zk1:2181"}}.',
            )
        ]
    flat = [
        key
        for key, entry in value.items()
        if isinstance(key, str) and key.lower() in _NAMES and not isinstance(entry, Mapping)
    ]
    if flat:
        # Read as aliases, these keys would each get "must be a dict of settings, like
        # {"HOSTS": {"HOSTS": ...}}": the fix is the alias around them instead.
        keys = ", ".join(f'"{key}": ...' for key in flat)
        return [
            _error(
                2,
                f"settings.ZK_RECIPES holds settings itself ({', '.join(flat)}), but it is "
                "a dict of aliases, like DATABASES.",
                f'Put them under an alias: ZK_RECIPES = {{"default": {{{keys}}}}}.',
            )
        ]
    found: list[checks.CheckMessage] = []
    for alias, entry in value.items():
        found.extend(_check_alias(str(alias), entry, value))
    if "default" not in value:
        found.append(
            checks.Warning(
                'settings.ZK_RECIPES has no "default" alias.',
                hint='The management commands, @zk_lock and locked() use "default" unless '
                'given alias=; name one of your aliases "default" or pass --alias/alias=.',
                obj="settings.ZK_RECIPES",
                id="zk_recipes.W001",
            )
        )
    found.extend(_check_uses(value))
    return found


def _check_alias(
    alias: str, entry: object, whole: Mapping[str, Any]
) -> Iterable[checks.CheckMessage]:
    if not isinstance(entry, Mapping):
        yield _error(
            2,
            f'ZK_RECIPES["{alias}"] must be a dict of settings, got {type(entry).__name__}.',
            f'Write it like ZK_RECIPES = {{"{alias}": {{"HOSTS": "zk1:2181"}}}}.',
        )
        return
    if entry.get("HOSTS") in (None, ""):
        yield _error(
            3,
            f'ZK_RECIPES["{alias}"] has no HOSTS.',
            f'Add the ensemble: ZK_RECIPES = {{"{alias}": {{"HOSTS": "zk1:2181,zk2:2181"}}}}.',
        )
    broken = False
    for key, value in entry.items():
        name = key.lower() if isinstance(key, str) else None
        trial = {"HOSTS": _PLACEHOLDER_HOSTS, key: value}
        try:
            read_settings({alias: trial}, Spelling.DJANGO, alias=alias, extra=_EXTRA)
        except ConfigurationError as exc:
            broken = True
            if name not in _NAMES or key != key.upper():
                yield _error(4, f"{exc}.")
            elif name in _TIMEOUTS:
                yield _error(
                    6, f"{exc}.", "Timeouts are seconds: a number > 0 (fractions in (0, 1])."
                )
            elif name == "retry":
                yield _error(7, f"{exc}.", "See docs/settings.md for the retry policies.")
            else:
                yield _error(5, f"{exc}.")
    if broken or entry.get("HOSTS") in (None, ""):
        return
    try:
        read_settings(whole, Spelling.DJANGO, alias=alias, extra=_EXTRA)
    except ConfigurationError as exc:
        yield _error(9, f"{exc}.")


def _check_uses(value: Mapping[str, Any]) -> Iterable[checks.CheckMessage]:
    _import_urlconf()
    for alias, places in sorted(_settings.uses().items()):
        if alias not in value:
            known = ", ".join(repr(str(a)) for a in value) or "none"
            yield _error(
                8,
                f"{', '.join(sorted(set(places)))} use{'s' if len(set(places)) == 1 else ''} "
                f"the ZooKeeper alias {alias!r}, which settings.ZK_RECIPES lacks "
                f"(known: {known}).",
                f'Add ZK_RECIPES["{alias}"] = {{"HOSTS": ...}} or pass an existing alias.',
            )


def _import_urlconf() -> None:
    """Import the views (through the URLconf) so their decorators note their aliases."""
    from django.urls import get_resolver

    try:
        get_resolver().url_patterns  # noqa: B018 - importing is the point
    except Exception:
        return


def check_connectivity(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """The deploy check: connect to each alias within ``CONNECT_CHECK_SECONDS``."""
    try:
        names = _settings.aliases()
    except ConfigurationError:
        return []  # the static checks say what is wrong
    found: list[checks.CheckMessage] = []
    for alias in names:
        try:
            settings = _settings.config(alias).client
        except ConfigurationError:
            continue
        found.extend(_connect(alias, settings))
    return found


def _connect(alias: str, settings: ClientSettings) -> Iterable[checks.CheckMessage]:
    bound = min(CONNECT_CHECK_SECONDS, settings.connection_timeout)
    client = ZkClient(settings=settings.replace(connection_timeout=bound))
    try:
        client.start(bound)
        negotiated = client.negotiated_session_timeout or settings.session_timeout
    except ZkRecipesError as exc:
        yield checks.Error(
            f'ZooKeeper alias "{alias}" ({settings.hosts}) could not be reached within '
            f"{bound:g}s: {exc}",
            hint="Check that the ensemble is up and reachable from this host, and HOSTS.",
            obj="settings.ZK_RECIPES",
            id="zk_recipes.E010",
        )
        return
    finally:
        client.close()
    yield checks.Info(
        f'ZooKeeper alias "{alias}" ({settings.hosts}): connected; session timeout '
        f"{negotiated:g}s negotiated ({settings.session_timeout:g}s asked).",
        obj="settings.ZK_RECIPES",
        id="zk_recipes.I001",
    )
    if abs(negotiated - settings.session_timeout) > 1e-3:
        yield checks.Warning(
            f'ZooKeeper alias "{alias}": the servers granted a {negotiated:g}s session timeout, '
            f"not the {settings.session_timeout:g}s asked (servers clamp it to their "
            "minSessionTimeout..maxSessionTimeout, by default 2..20 tickTime).",
            hint="A crashed process holds its locks for the granted time: ask within the "
            "servers' bounds, or change their minSessionTimeout/maxSessionTimeout.",
            obj="settings.ZK_RECIPES",
            id="zk_recipes.W002",
        )
