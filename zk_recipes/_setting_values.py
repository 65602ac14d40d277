"""How each setting's value may be written, and the check that turns it into what the client takes.

Why a module of its own: the table of settings (``_config``) says *which*
settings exist and where a framework keeps them; this module says what a
value of each may look like. Settings files and environment variables cannot
build objects, so every object-valued setting has a plain-data form:

- retry: ``{"policy": "ExponentialBackoffRetry", "base_sleep": 0.1, "max_retries": 5}``,
  naming a policy class of ``_retry`` and its constructor's arguments;
- TLS: ``{"ca_file": ..., "cert_file": ..., "key_file": ..., "key_password": ...,
  "verify_certs": ..., "check_hostname": ...}``, checked against the files at once
  (a missing CA file should fail when the settings are read, not at the first
  connection attempt, where kazoo reports only "timed out");
- auth: ``"scheme:credential"`` strings or ``(scheme, credential)`` pairs;
- default ACL: a constant's name (``"CREATOR_ALL_ACL"``) or zkCli's
  ``scheme:id:perms`` entries.

A parser takes the value and ``text``: True when the value is a string from
the environment, which must be converted (numbers, booleans, JSON). It returns
the checked value or raises ``ConfigurationError`` with a message meant to
follow the setting's name ("must be a number of seconds, got 'ten'"); the
reader adds the name, in the spelling the value came from.

Size: over the house limit (tests/test_module_sizes.py): one small parser per
kind of value, each with its fix-it message; they share the conversions from
environment text and nothing else, so the file is a list, read one entry at a time.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from zk_recipes._errors import ConfigurationError, shown
from zk_recipes._paths import normalize_namespace, validate_path
from zk_recipes._retry import (
    BoundedExponentialBackoffRetry,
    ExponentialBackoffRetry,
    PlateauRetry,
    RetryForever,
    RetryNTimes,
    RetryOneTime,
    RetryPolicy,
    RetryUntilElapsed,
)
from zk_recipes._settings import TlsOptions, parse_hosts
from zk_recipes._types import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Acl, Perms

#: (value, text) -> the checked value; ``text`` is True for a string from the environment.
Parser = Callable[[object, bool], object]

#: The policies a retry dict may name: every concrete policy of ``_retry``.
RETRY_POLICIES: dict[str, type[RetryPolicy]] = {
    cls.__name__: cls
    for cls in (
        ExponentialBackoffRetry,
        BoundedExponentialBackoffRetry,
        PlateauRetry,
        RetryNTimes,
        RetryOneTime,
        RetryForever,
        RetryUntilElapsed,
    )
}
_ACL_CONSTANTS = {
    "OPEN_ACL_UNSAFE": OPEN_ACL_UNSAFE,
    "CREATOR_ALL_ACL": CREATOR_ALL_ACL,
    "READ_ACL_UNSAFE": READ_ACL_UNSAFE,
}
_PERM_LETTERS = {
    "c": Perms.CREATE,
    "d": Perms.DELETE,
    "r": Perms.READ,
    "w": Perms.WRITE,
    "a": Perms.ADMIN,
}
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def did_you_mean(
    word: str, choices: Iterable[str], *, spell: Callable[[str], str] | None = None
) -> str:
    """`` (did you mean 'x'?)`` for the nearest of ``choices``, else `` (known: ...)``.

    Compared without case; ``spell`` writes a choice as the user should (a name
    as its key), so that a common prefix does not make every key look near.
    """
    options = list(choices)
    show = spell or str
    by_lower = {c.lower(): c for c in options}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    if close:
        return f" (did you mean {show(by_lower[close[0]])!r}?)"
    return f" (known: {', '.join(repr(show(c)) for c in options)})"


def _json(value: str, like: str) -> object:
    try:
        return json.loads(value)
    except ValueError as exc:
        raise ConfigurationError(f"is not valid JSON ({exc}), got {value!r}; write {like}") from exc


def _got(value: object) -> str:
    return f"got {type(value).__name__} {shown(value)}"


# -- scalars ---------------------------------------------------------------------------------


def _number(value: object, text: bool, what: str) -> float:
    # A numeric string is a number in every spelling, not only the environment's:
    # settings files often build their values from os.environ ("10").
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ConfigurationError(f"must be {what}, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"must be {what}, {_got(value)}")
    if not math.isfinite(value):
        raise ConfigurationError(f"must be {what}, got {shown(value)}")
    return float(value)


def seconds(value: object, text: bool) -> float:
    """A positive, finite number of seconds (a numeric string too)."""
    number = _number(value, text, "a positive number of seconds")
    if number <= 0:
        raise ConfigurationError(f"must be a positive number of seconds, got {shown(number, 0)}")
    return number


def fraction(value: object, text: bool) -> float:
    """A share in (0, 1] (a numeric string too)."""
    number = _number(value, text, "a number in (0, 1]")
    if not 0 < number <= 1:
        raise ConfigurationError(
            f"must be in (0, 1] (a share of the timeout), got {shown(number, 0, 1)}"
        )
    return number


def positive_int(value: object, text: bool) -> int:
    """A whole number above zero (a string of digits too)."""
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise ConfigurationError(f"must be a whole number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"must be a whole number, {_got(value)}")
    if value <= 0:
        raise ConfigurationError(f"must be above zero, got {value!r}")
    return value


def boolean(value: object, text: bool) -> bool:
    """True or False; from the environment, true/false, 1/0, yes/no or on/off."""
    if text and isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise ConfigurationError(f"must be true or false, got {value!r}")
    if not isinstance(value, bool):
        raise ConfigurationError(f"must be True or False, {_got(value)}")
    return value


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(f"must be a string, {_got(value)}")
    return value


def hosts(value: object, text: bool) -> str:
    """A connect string, or (in Python) a list of ``host:port`` strings."""
    if not isinstance(value, str) and not (
        isinstance(value, Sequence) and all(isinstance(h, str) for h in value)
    ):
        raise ConfigurationError(f"must be a string like 'zk1:2181,zk2:2181', {_got(value)}")
    joined = value if isinstance(value, str) else ",".join(value)
    parse_hosts(joined)
    return joined


def namespace(value: object, text: bool) -> str:
    """A chroot for every path: ``"myapp"`` or ``"/myapp"``."""
    return normalize_namespace(_string(value))


def prefix(value: object, text: bool) -> str:
    """An absolute znode path other than the root, without a trailing slash."""
    if not isinstance(value, str) or value == "/":
        raise ConfigurationError(
            f"must be an absolute znode path like '/celery' (not the root), got {value!r}"
        )
    try:
        return validate_path(value, what="the prefix")
    except ConfigurationError as exc:
        raise ConfigurationError(f"must be an absolute znode path like '/celery': {exc}") from None


def identifier(value: object, text: bool) -> str:
    """Any non-empty string."""
    return _string(value)


# -- retry -------------------------------------------------------------------------------------

_RETRY_LIKE = '{"policy": "ExponentialBackoffRetry", "base_sleep": 0.1, "max_retries": 5}'


def retry_policy(value: object, text: bool) -> RetryPolicy:
    """A RetryPolicy, or a dict naming a policy of ``_retry`` and its arguments."""
    if text and isinstance(value, str):
        value = _json(value, _RETRY_LIKE)
    elif isinstance(value, RetryPolicy):
        return value
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"must be a dict naming the policy and its arguments, like {_RETRY_LIKE}, "
            f"or a RetryPolicy object, {_got(value)}"
        )
    args = {str(k): v for k, v in value.items()}
    name = args.pop("policy", None)
    if not isinstance(name, str):
        raise ConfigurationError(
            f'needs "policy", the name of a policy class, like {_RETRY_LIKE}; '
            f"one of {', '.join(RETRY_POLICIES)}"
        )
    cls = RETRY_POLICIES.get(name)
    if cls is None:
        raise ConfigurationError(
            f"names no retry policy: {name!r}{did_you_mean(name, RETRY_POLICIES)}"
        )
    fields = [f for f in dataclasses.fields(cast(Any, cls)) if f.name != "rng"]
    known = [f.name for f in fields]
    for arg in args:
        if arg not in known:
            raise ConfigurationError(
                f"{name} takes no argument {arg!r}{did_you_mean(arg, known)}; "
                f"its arguments: {', '.join(known)}"
            )
    missing = [
        f.name
        for f in fields
        if f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
        and f.name not in args
    ]
    if missing:
        raise ConfigurationError(
            f"{name} needs {', '.join(repr(m) for m in missing)} too "
            f"(its arguments: {', '.join(known)})"
        )
    try:
        return cls(**args)
    except ConfigurationError as exc:
        message = str(exc)  # the policy's own checks name it already
        raise ConfigurationError(
            message if message.startswith(f"{name}: ") else f"{name}: {message}"
        ) from None


# -- TLS ---------------------------------------------------------------------------------------

_TLS_LIKE = '{"ca_file": "/etc/zookeeper/ca.pem"}'


def tls(value: object, text: bool) -> TlsOptions | None:
    """TlsOptions, a dict of its fields, True (system CAs) or False (no TLS); files checked."""
    if text and isinstance(value, str):
        word = value.strip().lower()
        value = (word in _TRUE) if word in _TRUE or word in _FALSE else _json(value, _TLS_LIKE)
    if value is False:
        return None
    if value is True:
        return TlsOptions()
    if isinstance(value, Mapping):
        known = [f.name for f in dataclasses.fields(TlsOptions)]
        for key in value:
            if key not in known:
                raise ConfigurationError(
                    f"has no key {key!r}{did_you_mean(str(key), known)}; its keys: "
                    f"{', '.join(known)}"
                )
        for key in ("ca_file", "cert_file", "key_file", "key_password"):
            if value.get(key) is not None and not isinstance(value[key], str):
                raise ConfigurationError(f'"{key}" must be a string, {_got(value[key])}')
        for key in ("verify_certs", "check_hostname"):
            if key in value and not isinstance(value[key], bool):
                raise ConfigurationError(f'"{key}" must be true or false, {_got(value[key])}')
        value = TlsOptions(**{str(k): v for k, v in value.items()})
    if not isinstance(value, TlsOptions):
        raise ConfigurationError(
            f"must be a dict such as {_TLS_LIKE} (keys: ca_file, cert_file, key_file, "
            f"key_password, verify_certs, check_hostname), or true, {_got(value)}"
        )
    check_tls(value)
    return value


def _readable(key: str, path: str) -> None:
    if not os.path.isfile(path):
        raise ConfigurationError(f'"{key}" names no file: {path!r} (give the full path)')
    if not os.access(path, os.R_OK):
        raise ConfigurationError(
            f'"{key}" names a file this process cannot read: {path!r} (check its permissions)'
        )


def check_tls(options: TlsOptions) -> None:
    """Refuse what kazoo would ignore or fail on only when it connects."""
    if options.check_hostname and not options.verify_certs:
        raise ConfigurationError(
            '"check_hostname" needs "verify_certs": set both to false to skip verification'
        )
    if bool(options.cert_file) != bool(options.key_file):
        raise ConfigurationError(
            'a client certificate needs both "cert_file" and "key_file" (kazoo ignores one alone)'
        )
    if options.key_password and not options.key_file:
        raise ConfigurationError('"key_password" is given without a "key_file"')
    for key in ("ca_file", "cert_file", "key_file"):
        path = getattr(options, key)
        if path:
            _readable(key, path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        if options.ca_file:
            context.load_verify_locations(options.ca_file)
    except ssl.SSLError as exc:
        raise ConfigurationError(
            f'"ca_file" {options.ca_file!r} holds no PEM certificate ({exc})'
        ) from None
    try:
        if options.cert_file and options.key_file:
            context.load_cert_chain(options.cert_file, options.key_file, options.key_password)
    except ssl.SSLError as exc:
        raise ConfigurationError(
            f'"cert_file" {options.cert_file!r} and "key_file" {options.key_file!r} do not '
            f"make a certificate and its key, or the key_password is wrong ({exc})"
        ) from None


# -- auth, SASL, ACL ---------------------------------------------------------------------------

_AUTH_LIKE = "'digest:user:secret' or [('digest', 'user:secret')]"


def _auth_entry(item: object) -> tuple[str, str]:
    if isinstance(item, str):
        scheme, sep, credential = item.strip().partition(":")
        if sep and scheme and credential:
            return scheme, credential
    elif (
        isinstance(item, Sequence)
        and len(item) == 2
        and all(isinstance(x, str) and x for x in item)
    ):
        return str(item[0]), str(item[1])
    raise ConfigurationError(
        f"has an entry {item!r} that is not 'scheme:credential' or a (scheme, credential) pair; "
        f"write {_AUTH_LIKE}"
    )


def auth(value: object, text: bool) -> tuple[tuple[str, str], ...]:
    """``"scheme:credential[,...]"`` or a list of such strings or of (scheme, credential) pairs."""
    if text and isinstance(value, str) and value.lstrip().startswith("["):
        value = _json(value, '[["digest", "user:secret"]]')
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, Sequence):
        raise ConfigurationError(f"must be {_AUTH_LIKE}, {_got(value)}")
    return tuple(_auth_entry(item) for item in value)


def sasl(value: object, text: bool) -> dict[str, str]:
    """kazoo's SASL options: a dict of strings with at least "mechanism"."""
    like = '{"mechanism": "DIGEST-MD5", "username": "user", "password": "secret"}'
    if text and isinstance(value, str):
        value = _json(value, like)
    if (
        not isinstance(value, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        or "mechanism" not in value
    ):
        raise ConfigurationError(f"must be a dict of strings with a mechanism, like {like}")
    return {str(k): str(v) for k, v in value.items()}


def _acl_entry(item: object) -> Acl:
    if isinstance(item, Acl):
        return item
    if isinstance(item, str):
        scheme, _, rest = item.strip().partition(":")
        ident, sep, letters = rest.rpartition(":")
        if scheme and sep and letters and set(letters) <= set(_PERM_LETTERS):
            perms = Perms(0)
            for letter in letters:
                perms |= _PERM_LETTERS[letter]
            return Acl(perms, scheme, ident)
    raise ConfigurationError(
        f"has an entry {item!r} that is neither an Acl nor zkCli's 'scheme:id:perms' "
        "(perms from the letters crwda, e.g. 'digest:app:<base64 sha1>:cdrwa', 'auth::cdrwa')"
    )


def default_acl(value: object, text: bool) -> tuple[Acl, ...]:
    """A constant's name, zkCli's ``scheme:id:perms`` entries, or Acl objects."""
    if text and isinstance(value, str) and value.lstrip().startswith("["):
        value = _json(value, '["auth::cdrwa"]')
    if isinstance(value, str):
        if value.strip() in _ACL_CONSTANTS:
            return _ACL_CONSTANTS[value.strip()]
        if ":" not in value:
            raise ConfigurationError(
                f"names no ACL: {value!r}{did_you_mean(value, _ACL_CONSTANTS)}; or give "
                "zkCli's 'scheme:id:perms' entries, comma-separated"
            )
        value = value.split(",")
    if not isinstance(value, Sequence) or not value:
        raise ConfigurationError(
            f"must be 'CREATOR_ALL_ACL', 'OPEN_ACL_UNSAFE', 'READ_ACL_UNSAFE' or a list of "
            f"zkCli's 'scheme:id:perms' entries, {_got(value)}"
        )
    return tuple(_acl_entry(item) for item in value)
