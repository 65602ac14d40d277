"""Payloads a Java reader of curator-x-discovery can read, checked before anything is written.

Curator types the payload (``@JsonTypeInfo(use = CLASS)``): a JSON object is
read as the Java class its ``"@class"`` key names, a bare string, number or
boolean as itself, then cast to the payload class the Java side was built
with. An object without ``@class``, or with a class the reader cannot load
or cast, makes Java's ``queryForInstances`` throw for the whole service (one
bad instance hides every other; its ServiceCache silently drops it). So a
payload is refused at ``register()`` unless it is:

- None, a str, an int, a finite float or a bool (read as String, Integer,
  Double, Boolean; an int beyond 32 bits is written as Jackson writes a
  Long, ``["java.lang.Long", n]``, and beyond 64 bits as a BigInteger);
- a ``JavaValue(java_class, value)``: any other value Jackson writes with
  its class in front (``["java.lang.Long", 5]``, ``["java.lang.Float", 1.5]``,
  ``["java.util.ArrayList", [...]]``), as read from a Java writer, so it is
  written back byte for byte;
- a dict whose first key is ``"@class"``, naming a Java class
  (``java.util.HashMap`` and ``java.util.LinkedHashMap`` load everywhere;
  ``spring_cloud_payload()`` writes Spring Cloud Zookeeper's
  ``ZookeeperInstance``), with string keys and JSON values below it.

``ServiceDiscovery(payload_class=...)`` names the class the Java readers
were built with; a payload that would not cast to it is refused too.
"""

from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass(frozen=True)
class JavaValue:
    """A payload Jackson writes with its Java class before it: ``["java.lang.Long", 5]``.

    Jackson writes String, Integer, Double and Boolean payloads bare and
    every other value as ``[class, value]``; reading a Java peer's Long gives
    ``JavaValue("java.lang.Long", 5)``, which writes back the same bytes.
    """

    java_class: str
    value: Any


_INT32 = range(-(2**31), 2**31)
_INT64 = range(-(2**63), 2**63)


def to_wire(payload: object) -> object:
    """The payload as Jackson's typed writer puts it in the JSON."""
    if isinstance(payload, JavaValue):
        return [payload.java_class, payload.value]
    if isinstance(payload, int) and not isinstance(payload, bool) and payload not in _INT32:
        return ["java.lang.Long" if payload in _INT64 else "java.math.BigInteger", payload]
    return payload


def from_wire(value: object) -> object:
    """The payload read from the JSON (a ``[class, value]`` pair becomes a JavaValue)."""
    if not isinstance(value, list):
        return value
    if len(value) != 2 or not isinstance(value[0], str):
        raise ValueError(f"a payload list must be [java class, value], got {value!r}")
    java_class, inner = value
    # What a plain int writes as reads back as the int itself.
    whole = isinstance(inner, int) and not isinstance(inner, bool)
    if whole and (
        (java_class == "java.lang.Long" and inner in _INT64 and inner not in _INT32)
        or (java_class == "java.math.BigInteger" and inner not in _INT64)
    ):
        return inner
    return JavaValue(java_class, inner)


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
    if isinstance(payload, JavaValue):
        if not isinstance(payload.java_class, str) or not _JAVA_NAME.fullmatch(payload.java_class):
            raise ConfigurationError(f"{what}: not a Java class name: {payload.java_class!r}")
        if payload_class not in (*_ANY, payload.java_class):
            raise ConfigurationError(
                f"{what} is read as {payload.java_class}, which Java cannot cast to the "
                f"{payload_class} its ServiceDiscovery was built with"
            )
        _check_json(payload.value, what)
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
