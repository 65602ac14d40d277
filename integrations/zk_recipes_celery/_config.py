"""Celery settings -> one frozen configuration, read once per app.

Celery's lower-case names (``app.conf.zk_recipes_hosts = "zk1:2181"``); a
Django project that loads Celery's settings with ``namespace="CELERY"``
writes ``CELERY_ZK_RECIPES_HOSTS``. The core's reader (``read_settings`` with
``Spelling.CELERY``) reads the client's settings and ``zk_recipes_prefix``
from the one table of settings; this module declares Celery's own settings to
it (``_CELERY_SETTINGS``) and keeps ``zk_recipes_client_options``, a dict of
``ClientSettings`` fields that the settings of their own override.

In a Django project one ``ZK_RECIPES`` serves both: when Django's settings
are configured in this process, have ``ZK_RECIPES`` and Celery's
configuration sets none of the client settings itself, the client settings
and ``IDENTIFIER`` come from the alias ``zk_recipes_django_alias`` of
``ZK_RECIPES``. The prefix stays Celery's (``/celery`` by default): the
singleton and beat nodes must not move when a project starts sharing
Django's settings, or running workers and beats on the old path would not
exclude the new ones. Celery's own client settings, when it sets any, win
entirely (no mixing of two ensembles' settings), and Django is never
imported here: only a process that has already configured it shares it.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Mapping
from typing import Any

from zk_recipes import (
    SETTINGS,
    ClientSettings,
    ConfigurationError,
    RecipesConfig,
    Setting,
    Spelling,
    read_settings,
)
from zk_recipes_celery._layouts import BEAT_SEGMENT, QUEUED_SEGMENT, SINGLETON_SEGMENT

_EAGER_MODES = ("lock", "bypass")
DEFAULT_PREFIX = "/celery"
DEFAULT_SCHEDULER = "celery.beat:PersistentScheduler"
_CLIENT_FIELDS = [f.name for f in dataclasses.fields(ClientSettings)]
#: The core's settings a client is made from (``hosts``, ``namespace``, ...).
_CLIENT_SETTINGS = tuple(s for s in SETTINGS if s.client_field)
#: Stands in for ``hosts`` while we learn which settings Celery's configuration
#: sets: the one required setting may yet come from Django. Never connected to.
_HOSTS_STAND_IN = {"hosts": "hosts-from-django.invalid:2181"}
_ALIAS_KEYS = "zk_recipes_django_alias (CELERY_ZK_RECIPES_DJANGO_ALIAS in Django's settings)"

log = logging.getLogger("zk_recipes.celery")


@dataclasses.dataclass(frozen=True)
class CeleryZkConfig:
    """What the integration needs, validated: the client and where our nodes go."""

    client: ClientSettings
    #: Root of our nodes (under the client's namespace): singletons, beat election.
    prefix: str = DEFAULT_PREFIX
    #: ``zk_recipes_identifier``: names this process (read for the integrations' common
    #: settings; the singleton's owner data names the task instead).
    identifier: str | None = None
    #: Name of the beat election; beats with the same name share one leader.
    beat_name: str = "default"
    #: "lock": eager/direct calls of singleton tasks lock too; "bypass": they do not.
    singleton_eager: str = "lock"
    #: The scheduler LeaderScheduler gates (``module:Class``).
    beat_scheduler: str = DEFAULT_SCHEDULER
    #: Connect in the worker's main process at start-up and fail the start if we cannot.
    check_on_start: bool = True

    @property
    def singleton_root(self) -> str:
        return f"{self.prefix}/{SINGLETON_SEGMENT}"

    @property
    def queued_root(self) -> str:
        """Where publish-time deduplication keeps its markers (``_publish``)."""
        return f"{self.prefix}/{QUEUED_SEGMENT}"

    @property
    def beat_path(self) -> str:
        return f"{self.prefix}/{BEAT_SEGMENT}/{self.beat_name}"


def _client_options(value: object, text: bool) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"must be a dict of ClientSettings fields, got {value!r}")
    for field in value:
        if field not in _CLIENT_FIELDS:
            raise ConfigurationError(
                f"{field!r} is not a ClientSettings field; the fields: {', '.join(_CLIENT_FIELDS)}"
            )
    return dict(value)


def _beat_name(value: object, text: bool) -> str:
    if not isinstance(value, str) or "/" in value or value in (".", ".."):
        raise ConfigurationError(f"must be a name without '/', got {value!r}")
    return value


def _singleton_eager(value: object, text: bool) -> str:
    if value not in _EAGER_MODES:
        raise ConfigurationError(f"must be one of {_EAGER_MODES}, got {value!r}")
    return str(value)


def _beat_scheduler(value: object, text: bool) -> str:
    if not isinstance(value, str) or (":" not in value and "." not in value):
        raise ConfigurationError(
            "must name a scheduler class like "
            f"'django_celery_beat.schedulers:DatabaseScheduler', got {value!r}"
        )
    return value


def _check_on_start(value: object, text: bool) -> bool:
    # A string from the environment ("false") must not read as True, as bool() would.
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("true", "1", "yes", "on"):
            return True
        if word in ("false", "0", "no", "off"):
            return False
    raise ConfigurationError(
        f"must be True or False (or true/false, 1/0, yes/no, on/off), got {value!r}"
    )


def _django_alias(value: object, text: bool) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"must be an alias of Django's ZK_RECIPES, got {value!r}")
    return value


#: Celery's own settings, beside the core's table (docs/settings.md lists both).
_CELERY_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "client_options",
        "dict",
        {},
        "Any other ClientSettings field, objects allowed; a setting of its own wins over "
        "the same field here.",
        _client_options,
        {"read_only": True},
    ),
    Setting(
        "beat_name",
        "str",
        None,
        "The beat election's name: beats with the same name share one leader.",
        _beat_name,
        "default",
        default_text="the app's main name",
    ),
    Setting(
        "beat_scheduler",
        "str",
        DEFAULT_SCHEDULER,
        "The scheduler class LeaderScheduler wraps.",
        _beat_scheduler,
        "django_celery_beat.schedulers:DatabaseScheduler",
    ),
    Setting(
        "singleton_eager",
        "'lock' or 'bypass'",
        "lock",
        "'bypass': eager and direct calls of singleton tasks do not lock (tests without "
        "ZooKeeper).",
        _singleton_eager,
        "bypass",
    ),
    Setting(
        "check_on_start",
        "bool",
        True,
        "Connect in the worker's main process at start-up and fail the start when that is "
        "impossible.",
        _check_on_start,
        False,
    ),
    Setting(
        "django_alias",
        "str",
        "default",
        "The alias of Django's ZK_RECIPES whose client settings and IDENTIFIER Celery takes "
        "when Django's settings are configured and Celery sets no client settings itself.",
        _django_alias,
        "celery",
    ),
)


def read_config(conf: Mapping[str, Any], *, app_name: str | None = None) -> CeleryZkConfig:
    """Build the configuration from Celery's ``app.conf``; raise ConfigurationError if wrong.

    The client settings come from Django's ``ZK_RECIPES`` when Django's
    settings are configured in this process, have it, and ``conf`` sets
    none of them (see the module's docstring).
    """
    # Read first, every key and value checked: app.conf loads its source (Django's
    # settings with config_from_object) on first use.
    own = _read(conf, defaults=_HOSTS_STAND_IN)
    own_keys = _client_keys(own)
    django = _django_zk_recipes()
    if django is not None and not own_keys:
        config = _read(conf, defaults=_from_django(django, own.extra["django_alias"]))
    else:
        if django is not None:
            log.info(
                "zk-recipes: the Celery configuration sets client settings of its own (%s): "
                "they win, Django's ZK_RECIPES is not read for Celery",
                ", ".join(own_keys),
            )
        config = own if "hosts" in own.given else _read(conf)  # raises: hosts is not set
    return _celery_config(config, app_name)


def _read(
    conf: Mapping[str, Any], *, defaults: Mapping[str, object] | None = None
) -> RecipesConfig:
    return read_settings(
        conf,
        Spelling.CELERY,
        default_prefix=DEFAULT_PREFIX,
        extra=_CELERY_SETTINGS,
        defaults=defaults,
    )


def _client_keys(config: RecipesConfig) -> list[str]:
    """The client settings Celery's configuration sets, itself or in client_options."""
    names = [s.name for s in _CLIENT_SETTINGS if s.name in config.given]
    if config.extra["client_options"]:
        names.append("client_options")
    return [Spelling.CELERY.key(name) for name in names]


def _django_zk_recipes() -> Any:
    """Django's ``settings.ZK_RECIPES``, if Django's settings are configured in this process.

    Never imports Django: a process that has not imported ``django.conf`` has no
    Django settings to share, and Celery must run where Django is not installed.
    """
    module = sys.modules.get("django.conf")
    settings = getattr(module, "settings", None)
    if settings is None or not getattr(settings, "configured", False):
        return None
    return getattr(settings, "ZK_RECIPES", None)


def _from_django(source: Any, alias: str) -> dict[str, object]:
    """The client settings and IDENTIFIER of ``ZK_RECIPES[alias]``, by canonical name."""
    if isinstance(source, Mapping) and alias not in source:
        known = ", ".join(repr(a) for a in source) or "none"
        raise ConfigurationError(
            f"{_ALIAS_KEYS} is {alias!r}, but Django's ZK_RECIPES has no alias {alias!r}; "
            f"known aliases: {known}. Set it to one of them, or give Celery client settings "
            "of its own (zk_recipes_hosts, ...)"
        )
    try:
        config = read_settings(source, Spelling.DJANGO, alias=alias)
    except ConfigurationError as exc:
        raise ConfigurationError(
            f"{exc} (Celery takes its client settings from Django's ZK_RECIPES, "
            "as its own configuration sets none)"
        ) from None
    values: dict[str, object] = {
        s.name: getattr(config.client, str(s.client_field)) for s in _CLIENT_SETTINGS
    }
    if config.identifier is not None:
        values["identifier"] = config.identifier
    return values


def _celery_config(config: RecipesConfig, app_name: str | None) -> CeleryZkConfig:
    options: dict[str, Any] = config.extra["client_options"]
    client = config.client
    if options:
        own = {s.client_field for s in SETTINGS if s.name in config.given}
        try:
            client = client.replace(**{k: v for k, v in options.items() if k not in own})
        except ConfigurationError as exc:
            raise ConfigurationError(f"zk_recipes_client_options: {exc}") from exc
    beat_name = config.extra["beat_name"]
    if beat_name is None:
        try:
            beat_name = _beat_name(app_name or "default", False)
        except ConfigurationError as exc:
            raise ConfigurationError(f"zk_recipes_beat_name: {exc} (the app's name)") from None
    return CeleryZkConfig(
        client=client,
        prefix=config.prefix,
        identifier=config.identifier,
        beat_name=beat_name,
        singleton_eager=config.extra["singleton_eager"],
        beat_scheduler=config.extra["beat_scheduler"],
        check_on_start=config.extra["check_on_start"],
    )
