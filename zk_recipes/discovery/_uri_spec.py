"""UriSpec: a URI template with ``{field}`` parts, parsed and built as Curator's ``UriSpec``.

Stored inside an instance's JSON as ``{"parts": [{"value": ..., "variable": ...}]}``,
so a Java peer builds the same URI from it. The parser follows Curator's
(a ``StringTokenizer`` on ``{`` and ``}``): text outside braces is a literal
part, text inside is a variable (trimmed), ``{}`` adds nothing, and a brace
out of place is an error. ``build()`` fills the fields Curator fills:
``scheme`` (``https`` when the instance has an SSL port, else ``http``),
``name``, ``id``, ``address``, ``port``, ``ssl-port``,
``registration-time-utc``, ``service-type`` (lower case), ``[`` and ``]``
(literal braces); a field the instance lacks becomes "" and an unknown one
is left out, as in Curator.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any, Protocol

from zk_recipes._errors import ConfigurationError


class _Instance(Protocol):
    """The fields of a ServiceInstance a URI is built from."""

    @property
    def name(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def address(self) -> str | None: ...
    @property
    def port(self) -> int | None: ...
    @property
    def ssl_port(self) -> int | None: ...
    @property
    def registration_time_utc(self) -> int: ...
    @property
    def service_type(self) -> enum.Enum: ...


@dataclasses.dataclass(frozen=True, slots=True)
class UriPart:
    """One token of a UriSpec: a literal (``variable=False``) or a field name."""

    value: str
    variable: bool


@dataclasses.dataclass(frozen=True, slots=True, init=False)
class UriSpec:
    """A URI template, e.g. ``UriSpec("{scheme}://{address}:{port}")``."""

    parts: tuple[UriPart, ...]

    def __init__(
        self, spec: str | None = None, *, parts: tuple[UriPart, ...] | None = None
    ) -> None:
        if parts is None:
            parts = _parse(spec or "")
        elif spec is not None:
            raise ConfigurationError("UriSpec takes a template or parts=, not both")
        object.__setattr__(self, "parts", tuple(parts))

    def build(self, instance: _Instance | None = None, variables: Mapping[str, object] = {}) -> str:
        """The URI, with ``instance``'s fields and ``variables`` (which win) filled in."""
        values: dict[str, object] = {"[": "{", "]": "}", "scheme": "http"}
        if instance is not None:
            values.update(
                {
                    "name": instance.name,
                    "id": instance.id,
                    "address": _or_empty(instance.address),
                    "port": _or_empty(instance.port),
                    "ssl-port": _or_empty(instance.ssl_port),
                    "registration-time-utc": instance.registration_time_utc,
                    "service-type": str(instance.service_type.value).lower(),
                }
            )
            if instance.ssl_port is not None:
                values["scheme"] = "https"
        values.update(variables)
        out: list[str] = []
        for part in self.parts:
            if not part.variable:
                out.append(part.value)
            elif values.get(part.value) is not None:
                out.append(str(values[part.value]))
        return "".join(out)

    def to_wire(self) -> dict[str, Any]:
        return {"parts": [{"value": p.value, "variable": p.variable} for p in self.parts]}

    @classmethod
    def from_wire(cls, value: object) -> UriSpec:
        if not isinstance(value, dict) or not isinstance(value.get("parts"), list):
            raise ValueError(f"uriSpec must be an object with a parts list, got {value!r}")
        parts = []
        for part in value["parts"]:
            if not isinstance(part, dict):
                raise ValueError(f"a uriSpec part must be an object, got {part!r}")
            text, variable = part.get("value", ""), part.get("variable", False)
            if not isinstance(text, str) or not isinstance(variable, bool):
                raise ValueError(f"a uriSpec part has a string value and a bool variable: {part!r}")
            parts.append(UriPart(text, variable))
        return cls(parts=tuple(parts))

    def __str__(self) -> str:
        return "".join("{" + p.value + "}" if p.variable else p.value for p in self.parts)


def _or_empty(value: object) -> object:
    return "" if value is None else value


def _parse(spec: str) -> tuple[UriPart, ...]:
    parts: list[UriPart] = []
    inside = False
    token: list[str] = []

    def flush() -> None:
        if token:
            text = "".join(token)
            parts.append(UriPart(text.strip() if inside else text, inside))
            token.clear()

    for char in spec:
        if char == "{":
            if inside:
                raise ConfigurationError(f"UriSpec {spec!r}: {{ is not allowed inside a field")
            flush()
            inside = True
        elif char == "}":
            if not inside:
                raise ConfigurationError(f"UriSpec {spec!r}: }} must follow a {{")
            flush()
            inside = False
        else:
            token.append(char)
    if inside:
        raise ConfigurationError(f"UriSpec {spec!r}: the last field is not closed with }}")
    flush()
    return tuple(parts)
