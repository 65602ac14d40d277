"""Celery settings -> one frozen configuration, read once per app.

Celery's lower-case names (``app.conf.zk_recipes_hosts = "zk1:2181"``); a
Django project that loads Celery's settings with ``namespace="CELERY"``
writes ``CELERY_ZK_RECIPES_HOSTS``. Every value is checked here, and an
error names the setting to fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from zk_recipes import ClientSettings, ConfigurationError

#: setting name -> ClientSettings field, for the ones with their own setting.
_CLIENT_FIELDS = {
    "zk_recipes_hosts": "hosts",
    "zk_recipes_namespace": "namespace",
    "zk_recipes_session_timeout": "session_timeout",
    "zk_recipes_connection_timeout": "connection_timeout",
    "zk_recipes_auth": "auth",
}
_EAGER_MODES = ("lock", "bypass")
DEFAULT_PREFIX = "/celery"
DEFAULT_SCHEDULER = "celery.beat:PersistentScheduler"


@dataclasses.dataclass(frozen=True)
class CeleryZkConfig:
    """What the integration needs, validated: the client and where our nodes go."""

    client: ClientSettings
    #: Root of our nodes (under the client's namespace): singletons, beat election.
    prefix: str = DEFAULT_PREFIX
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


def read_config(conf: Mapping[str, Any], *, app_name: str | None = None) -> CeleryZkConfig:
    """Build the configuration from Celery's ``app.conf``; raise ConfigurationError if wrong."""
    hosts = conf.get("zk_recipes_hosts")
    if not hosts:
        raise ConfigurationError(
            "zk_recipes_hosts is not set: add app.conf.zk_recipes_hosts = 'zk1:2181,zk2:2181' "
            "to the Celery configuration (CELERY_ZK_RECIPES_HOSTS in Django settings with "
            "namespace='CELERY')"
        )
    options = conf.get("zk_recipes_client_options") or {}
    if not isinstance(options, Mapping):
        raise ConfigurationError(
            f"zk_recipes_client_options must be a dict of ClientSettings fields, got {options!r}"
        )
    fields: dict[str, Any] = dict(options)
    for setting, field in _CLIENT_FIELDS.items():
        value = conf.get(setting)
        if value is not None:
            fields[field] = tuple(tuple(a) for a in value) if field == "auth" else value
    try:
        client = ClientSettings(**fields)
    except TypeError as exc:
        raise ConfigurationError(f"zk_recipes_client_options: {exc}") from exc
    except ConfigurationError as exc:
        raise ConfigurationError(f"Celery setting zk_recipes_*: {exc}") from exc

    prefix = conf.get("zk_recipes_prefix") or DEFAULT_PREFIX
    if not isinstance(prefix, str) or not prefix.startswith("/") or prefix.endswith("/"):
        raise ConfigurationError(
            f"zk_recipes_prefix must be an absolute znode path like '/celery', got {prefix!r}"
        )
    beat_name = conf.get("zk_recipes_beat_name") or app_name or "default"
    if not isinstance(beat_name, str) or "/" in beat_name or beat_name in (".", ".."):
        raise ConfigurationError(
            f"zk_recipes_beat_name must be a name without '/', got {beat_name!r}"
        )
    eager = conf.get("zk_recipes_singleton_eager") or "lock"
    if eager not in _EAGER_MODES:
        raise ConfigurationError(
            f"zk_recipes_singleton_eager must be one of {_EAGER_MODES}, got {eager!r}"
        )
    scheduler = conf.get("zk_recipes_beat_scheduler") or DEFAULT_SCHEDULER
    if not isinstance(scheduler, str) or (":" not in scheduler and "." not in scheduler):
        raise ConfigurationError(
            "zk_recipes_beat_scheduler must name a scheduler class like "
            f"'django_celery_beat.schedulers:DatabaseScheduler', got {scheduler!r}"
        )
    check = conf.get("zk_recipes_check_on_start")
    return CeleryZkConfig(
        client=client,
        prefix=prefix,
        beat_name=beat_name,
        singleton_eager=eager,
        beat_scheduler=scheduler,
        check_on_start=True if check is None else bool(check),
    )
