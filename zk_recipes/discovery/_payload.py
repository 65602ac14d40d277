"""Payloads a Java reader of curator-x-discovery can read, checked before anything is written.

Curator types the payload (``@JsonTypeInfo(use = CLASS)``): a JSON object is
read as the Java class its ``"@class"`` key names, a bare string, number or
boolean as itself, then cast to the payload class the Java side was built
with. An object without ``@class``, or with a class the reader cannot load
or cast, makes Java's ``queryForInstances`` throw for the whole service (one
bad instance hides every other; its ServiceCache silently drops it). So a
payload is refused at ``register()`` unless it is:

- None, a str, an int, a finite float or a bool (read as String, Integer or
  Long, Double, Boolean);
- a dict whose first key is ``"@class"``, naming a Java class
  (``java.util.HashMap`` and ``java.util.LinkedHashMap`` load everywhere;
  ``spring_cloud_payload()`` writes Spring Cloud Zookeeper's
  ``ZookeeperInstance``), with string keys and JSON values below it.

``ServiceDiscovery(payload_class=...)`` names the class the Java readers
were built with; a payload that would not cast to it is refused too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from zk_recipes._errors import ConfigurationError

CLASS_KEY = "@class"
SPRING_CLOUD_INSTANCE = "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance"
#: Java classes a scalar payload is read as, and those that accept any payload.
_SCALAR_CLASSES = {
    str: ("java.lang.String",),
    bool: ("java.lang.Boolean",),
    int: ("java.lang.Integer", "java.lang.Long", "java.lang.Number"),
    float: ("java.lang.Double", "java.lang.Number"),
}
_ANY = ("java.lang.Object", None)
_JAVA_NAME = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*")


def spring_cloud_payload(
    name: str, id: str | None = None, metadata: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The payload Spring Cloud Zookeeper writes (and its ``ZookeeperInstance`` reads).

    ``id`` is Spring's application instance id (by default the service name),
    not the discovery instance id; ``metadata`` string to string.
    """
    meta = dict(metadata or {})
    for key, value in meta.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigurationError(
                f"Spring Cloud metadata maps strings to strings; got {key!r}: {value!r}"
            )
    return {CLASS_KEY: SPRING_CLOUD_INSTANCE, "id": id or name, "name": name, "metadata": meta}


def check_payload(payload: object, payload_class: str | None = None, *, where: str = "") -> None:
    """ConfigurationError saying why a Java reader could not read ``payload``."""
    what = f"the payload of {where}" if where else "the payload"
    if payload is None:
        return
    if isinstance(payload, dict):
        _check_object(payload, payload_class, what)
        return
    for kind, classes in _SCALAR_CLASSES.items():
        if type(payload) is kind:
            if isinstance(payload, float) and not math.isfinite(payload):
                raise ConfigurationError(f"{what} is {payload!r}: JSON has no such number")
            if payload_class not in (*classes, *_ANY):
                raise ConfigurationError(
                    f"{what} is a {kind.__name__}, which a Java reader gets as {classes[0]}, "
                    f"not the {payload_class} its ServiceDiscovery was built with: give a dict "
                    f'with "@class": "{payload_class}"'
                )
            return
    raise ConfigurationError(
        f"{what} is a {type(payload).__name__}: a Java reader takes None, a str, int, float, "
        'bool, or a dict whose "@class" names the Java class to read it as '
        '(e.g. {"@class": "java.util.HashMap", ...}; a list goes inside such a dict)'
    )


def _check_object(payload: dict[Any, Any], payload_class: str | None, what: str) -> None:
    keys = list(payload)
    if not keys or keys[0] != CLASS_KEY:
        hint = (
            '"@class" must come first (Jackson reads the type before the fields)'
            if CLASS_KEY in payload
            else 'it has no "@class": Jackson cannot tell which Java class to read it as, and '
            "Java's queryForInstances would fail for the whole service"
        )
        raise ConfigurationError(
            f'{what} is a dict, and {hint}. Start it with "@class": "java.util.HashMap" '
            "(any Java reader), the Java side's payload class, or use spring_cloud_payload()"
        )
    java_class = payload[CLASS_KEY]
    if not isinstance(java_class, str) or not _JAVA_NAME.fullmatch(java_class):
        raise ConfigurationError(f'{what}: "@class" must be a Java class name, got {java_class!r}')
    if payload_class not in (*_ANY, java_class) and not (
        payload_class in ("java.util.Map", "java.util.AbstractMap")
        and java_class in ("java.util.HashMap", "java.util.LinkedHashMap", "java.util.TreeMap")
    ):
        raise ConfigurationError(
            f'{what} is read as {java_class} ("@class"), which Java cannot cast to the '
            f"{payload_class} its ServiceDiscovery was built with; the reader would fail for "
            "the whole service"
        )
    _check_json(payload, what)


def _check_json(value: object, what: str) -> None:
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"{what} holds {value!r}: JSON has no such number")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigurationError(f"{what} has a key {key!r}: JSON keys are strings")
            _check_json(item, what)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_json(item, what)
        return
    raise ConfigurationError(f"{what} holds a {type(value).__name__}, which JSON cannot carry")
