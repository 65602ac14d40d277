"""Celery settings -> one frozen configuration, read once per app.

Celery's lower-case names (``app.conf.zk_recipes_hosts = "zk1:2181"``); a
Django project that loads Celery's settings with ``namespace="CELERY"``
writes ``CELERY_ZK_RECIPES_HOSTS``. The core's reader (``read_settings`` with
``Spelling.CELERY``) reads the client's settings and ``zk_recipes_prefix``
from the one table of settings; this module declares Celery's own settings to
it (``_CELERY_SETTINGS``) and keeps ``zk_recipes_client_options``, a dict of
``ClientSettings`` fields that the settings of their own override.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from zk_recipes import (
    SETTINGS,
    ClientSettings,
    ConfigurationError,
    Setting,
    Spelling,
    read_settings,
)

_EAGER_MODES = ("lock", "bypass")
DEFAULT_PREFIX = "/celery"
DEFAULT_SCHEDULER = "celery.beat:PersistentScheduler"
_CLIENT_FIELDS = [f.name for f in dataclasses.fields(ClientSettings)]


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
        return f"{self.prefix}/singleton"

    @property
    def beat_path(self) -> str:
        return f"{self.prefix}/beat/{self.beat_name}"


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
    return bool(value)


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
)


def read_config(conf: Mapping[str, Any], *, app_name: str | None = None) -> CeleryZkConfig:
    """Build the configuration from Celery's ``app.conf``; raise ConfigurationError if wrong."""
    config = read_settings(
        conf, Spelling.CELERY, default_prefix=DEFAULT_PREFIX, extra=_CELERY_SETTINGS
    )
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
