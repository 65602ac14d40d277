"""Argument checks shared by the recipes: one message for each mistake.

Every bad argument raises ConfigurationError (a ValueError), or its
WrongTypeError (also a TypeError) for a value of the wrong type, naming the
argument and what would be right.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zk_recipes._client.client import ZkClient
from zk_recipes._errors import ConfigurationError, WrongTypeError


def require_client(client: object, who: str) -> ZkClient:
    """``client`` if it is a ZkClient (what every recipe takes first)."""
    if not isinstance(client, ZkClient):
        if type(client).__module__.split(".")[0] == "kazoo":
            raise WrongTypeError(
                f"{who} needs a zk_recipes ZkClient, got kazoo's {type(client).__name__}: "
                "a ZkClient makes and manages its own kazoo client (states, simulated expiry, "
                "guaranteed deletes). Make one with the same hosts, e.g. "
                "ZkClient('zk1:2181', namespace='myapp').start(); client.kazoo_client is "
                "its kazoo client, for code that still needs one"
            )
        raise WrongTypeError(
            f"{who} needs a ZkClient, got {client!r}: pass a started client as the first "
            "argument, e.g. ZkClient('zk1:2181', namespace='myapp').start()"
        )
    return client


def require_int(value: object, name: str, *, minimum: int) -> int:
    """``value`` if it is an int >= ``minimum`` (bool is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WrongTypeError(f"{name} must be an int >= {minimum}, got {value!r}")
    if value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def require_callable(value: object, name: str) -> Callable[..., Any]:
    if not callable(value):
        raise WrongTypeError(f"{name} must be callable, got {value!r}")
    return value


def require_str(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise WrongTypeError(f"{name} must be a str, got {value!r}")
    return value


def optional_str(value: object, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise WrongTypeError(f"{name} must be a str or None, got {value!r}")
    return value
