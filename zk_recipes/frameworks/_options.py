"""A face's constructor options: settings by canonical name, checked when the face is made.

Flask's ``ZkRecipes(hosts=..., session_timeout=...)`` and Starlette's take
the settings of ``docs/settings.md`` as keyword arguments, each a default
that the app's own configuration (``app.config``, the environment) beats. A
typo or a wrong value fails where the face is made, at import, naming the
option and an example, not at the first request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zk_recipes import SETTINGS, ConfigurationError
from zk_recipes.frameworks._announcement import SERVICE_SETTING

_TABLE = {setting.name: setting for setting in (*SETTINGS, SERVICE_SETTING)}


def parse_options(options: Mapping[str, Any], call: str = "ZkRecipes") -> dict[str, object]:
    """``options`` checked, by canonical name (None left out): ``read_settings(defaults=)``.

    ``call`` is how the user wrote the constructor, for the messages.
    """
    parsed: dict[str, object] = {}
    for name, value in options.items():
        setting = _TABLE.get(name)
        if setting is None:
            known = ", ".join(sorted(_TABLE))
            raise ConfigurationError(f"{call}({name}=...) is not a setting; the settings: {known}")
        if value is None:
            continue
        try:
            parsed[name] = setting.parse(value, False)
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"{call}({name}=...): {exc}; for example {call}({name}={setting.example!r})"
            ) from None
    return parsed


__all__ = ["parse_options"]
