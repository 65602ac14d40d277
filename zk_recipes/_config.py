"""Settings from a framework's configuration, once: one table, four spellings, one reader.

Why: a setting described in four places drifts in four ways. ``SETTINGS``
lists every setting once (name, type, default, meaning, the check of its
value); a ``Spelling`` derives from the one name the key each framework uses;
``read_settings`` turns a framework's mapping into a ``RecipesConfig``: the
client's ``ClientSettings`` plus the integration's options. docs/settings.md
is held to this table by tests/test_docs.py.

==============  ==============================================  ==============================
spelling        where the settings are                          ``session_timeout``
==============  ==============================================  ==============================
``DJANGO``      ``settings.ZK_RECIPES = {"default": {...}}``    ``SESSION_TIMEOUT``
``FLASK``       ``app.config``                                  ``ZK_RECIPES_SESSION_TIMEOUT``
``CELERY``      ``app.conf``                                    ``zk_recipes_session_timeout``
``ENV``         ``os.environ`` (strings, for the command line)  ``ZK_RECIPES_SESSION_TIMEOUT``
==============  ==============================================  ==============================

Every key under a spelling's prefix must be a setting: a typo fails with a
"did you mean" instead of being ignored, as a silently ignored
``SESION_TIMEOUT`` would leave locks held for the default 10 s after a crash.
A value of None or ``""`` means "not set" (the default applies), so an empty
environment variable or a Celery setting read from an unset one is no error.
Every error is a ``ConfigurationError`` naming the setting as the user wrote
it and showing how to write it. How each value may be written (plain data for
retry policies, TLS, auth, ACLs) lives in ``_setting_values``.

Size: over the house limit (tests/test_module_sizes.py): a quarter of it is
the settings table itself (data, one entry per setting), which is kept whole
so docs/settings.md can be generated from it; the parsers are _setting_values'.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import re
import shlex
import types
from collections.abc import Mapping, Sequence
from typing import Any

from zk_recipes import _setting_values as _values
from zk_recipes._errors import ConfigurationError
from zk_recipes._setting_values import Parser, did_you_mean
from zk_recipes._settings import ClientSettings

_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting: its canonical name and what the docs and the reader need to know of it.

    ``parse(value, text)`` checks a value and returns what the client takes;
    ``text`` is True for a string from the environment, to be converted. It
    raises ``ConfigurationError`` with a message that follows the setting's
    name ("must be ..."). ``example`` is a value shown in error messages and
    docs, as each spelling writes it.
    """

    name: str
    type: str
    default: object
    meaning: str
    parse: Parser
    example: object
    #: The ClientSettings field the setting fills; None for an integration option.
    client_field: str | None = None
    required: bool = False
    #: The default as the docs show it, where ``repr(default)`` would not say it.
    default_text: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigurationError(
                f"a setting's name is lower-case words joined by '_', like 'beat_name', "
                f"got {self.name!r}"
            )


def _client_default(field: str) -> object:
    spec = {f.name: f for f in dataclasses.fields(ClientSettings)}[field]
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return None if spec.default is dataclasses.MISSING else spec.default


def _client(
    name: str,
    type_: str,
    meaning: str,
    parse: Parser,
    example: object,
    *,
    field: str | None = None,
    default_text: str | None = None,
) -> Setting:
    field = field or name
    return Setting(
        name,
        type_,
        _client_default(field),
        meaning,
        parse,
        example,
        client_field=field,
        required=name == "hosts",
        default_text=default_text,
    )


#: Every setting, client and integration, once. Its order is the docs' order.
#: Where the integrations and the ``zk-recipes`` command put their nodes under the
#: namespace, unless told otherwise (the ``prefix`` setting). Written here only:
#: ``zk-recipes lock X``, ``manage.py zklock X``, ``@zk_lock`` and Flask's
#: ``@zk.locked`` exclude each other because they all default to it.
DEFAULT_PREFIX = "/zk-recipes"

SETTINGS: tuple[Setting, ...] = (
    _client(
        "hosts",
        "str",
        "The ensemble: 'host:port,host:port', port 2181 if left out; IPv6 as '[::1]:2181'. "
        "A '/chroot' suffix is refused: use namespace.",
        _values.hosts,
        "zk1:2181,zk2:2181,zk3:2181",
        default_text="required",
    ),
    _client(
        "namespace",
        "str",
        "A prefix for every path, like Curator's namespace: 'myapp' and '/myapp' both mean "
        "/myapp/...; created lazily as a CONTAINER node.",
        _values.namespace,
        "myapp",
        default_text='"" (none)',
    ),
    _client(
        "session_timeout",
        "float seconds",
        "The session timeout asked of the server (which may clamp it). How long a process "
        "that died without closing (kill -9) keeps its locks, leases and leadership.",
        _values.seconds,
        10.0,
    ),
    _client(
        "connection_timeout",
        "float seconds",
        "How long start() waits for a session, and the time limit of each request.",
        _values.seconds,
        15.0,
    ),
    _client(
        "retry",
        "retry dict or RetryPolicy",
        "How client.retry() and the recipes retry connection errors: a policy of "
        "zk_recipes named with its arguments.",
        _values.retry_policy,
        {"policy": "ExponentialBackoffRetry", "base_sleep": 0.1, "max_retries": 5},
        field="retry_policy",
        default_text='{"policy": "ExponentialBackoffRetry", "base_sleep": 0.1, "max_retries": 5}',
    ),
    _client(
        "auth",
        "'scheme:credential' list",
        "Credentials sent (again on every reconnect), as 'digest:user:secret' strings or "
        "(scheme, credential) pairs.",
        _values.auth,
        ["digest:user:secret"],
        default_text="() (none)",
    ),
    _client(
        "sasl",
        "dict of str",
        "kazoo's SASL options, with at least 'mechanism' (DIGEST-MD5 or GSSAPI); needs pure-sasl.",
        _values.sasl,
        {"mechanism": "DIGEST-MD5", "username": "user", "password": "secret"},
    ),
    _client(
        "default_acl",
        "ACL name or 'scheme:id:perms' list",
        "The ACL of nodes created without acl=: CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, "
        "READ_ACL_UNSAFE, or zkCli's 'scheme:id:perms' entries.",
        _values.default_acl,
        "CREATOR_ALL_ACL",
        default_text="None (open)",
    ),
    _client(
        "tls",
        "TLS dict, true or TlsOptions",
        "TLS to the servers' secureClientPort; the files are checked when the settings are "
        "read. true: TLS with the system's CAs.",
        _values.tls,
        {"ca_file": "/etc/zookeeper/ca.pem"},
        default_text="None (plain TCP)",
    ),
    _client(
        "read_only",
        "bool",
        "Must stay false: read-only servers are refused, since no hold can be proven on one "
        "(docs/client.md#read-only-servers).",
        _values.boolean,
        False,
    ),
    _client(
        "track_ensemble",
        "bool",
        "Follow the ensemble's own config (/zookeeper/config, dynamic reconfiguration): a "
        "client reconnects to the servers it names, so replacing every server needs no "
        "restart (docs/ensemble.md). Quiet where the server does not allow it.",
        _values.boolean,
        True,
    ),
    _client(
        "prefer_observers",
        "bool",
        "Of the followed ensemble's servers, connect to its observers first (reads served "
        "near the client, writes forwarded; the session's guarantees are the same), the "
        "voters if none answers (docs/ensemble.md#observers-near-the-clients). Needs "
        "track_ensemble.",
        _values.boolean,
        False,
    ),
    _client(
        "simulated_expiry_fraction",
        "float in (0, 1]",
        "After this share of the negotiated session timeout without proof that the quorum "
        "heard it, the client declares the session LOST by itself, before the leader can "
        "expire it (docs/client.md#simulated-expiry).",
        _values.fraction,
        0.66,
    ),
    _client(
        "max_data_bytes",
        "int",
        "Larger node data is refused before it is sent, and so is any request over "
        "max_data_bytes + 1024 (a long path, many ACL entries, a multi): set it 1024 under "
        "the servers' jute.maxbuffer.",
        _values.positive_int,
        1047551,
        default_text="1047551 (1 MiB - 1 KiB - 1)",
    ),
    Setting(
        "prefix",
        "str",
        None,
        "Root of the integration's nodes, under the namespace: an absolute path.",
        _values.prefix,
        DEFAULT_PREFIX,
        default_text=f'"{DEFAULT_PREFIX}"; Celery: "/celery"',
    ),
    Setting(
        "identifier",
        "str",
        None,
        "Names this process in the owner data an integration writes, beside host and pid.",
        _values.identifier,
        "web-1",
    ),
)


class Spelling(enum.Enum):
    """Where a framework keeps the settings, and the key it gives each one."""

    DJANGO = "Django"
    FLASK = "Flask"
    CELERY = "Celery"
    ENV = "environment"

    def key(self, name: str) -> str:
        """The setting's key: ``HOSTS``, ``ZK_RECIPES_HOSTS`` or ``zk_recipes_hosts``."""
        if self is Spelling.DJANGO:
            return name.upper()
        if self is Spelling.CELERY:
            return f"zk_recipes_{name}"
        return f"ZK_RECIPES_{name.upper()}"

    def where(self, key: str, *, alias: str = "default") -> str:
        """The setting's full name in a message, from its key as the user wrote it."""
        if self is Spelling.DJANGO:
            return f'ZK_RECIPES["{alias}"]["{key}"]'
        if self is Spelling.ENV:
            return f"environment variable {key}"
        return key

    def assignment(self, setting: Setting, *, alias: str = "default") -> str:
        """How to write the setting's example value in this spelling."""
        key = self.key(setting.name)
        example = setting.example
        if self is Spelling.DJANGO:
            return f"ZK_RECIPES = {{{alias!r}: {{{key!r}: {example!r}, ...}}}}"
        if self is Spelling.FLASK:
            return f"app.config[{key!r}] = {example!r}"
        if self is Spelling.CELERY:
            return f"app.conf.{key} = {example!r}"
        if isinstance(example, bool):
            text = str(example).lower()
        elif isinstance(example, (Mapping, list)):
            text = json.dumps(example)
        else:
            text = str(example)
        return f"{key}={shlex.quote(text)}"


@dataclasses.dataclass(frozen=True)
class RecipesConfig:
    """A framework's settings, read and checked: the client's and the integration's."""

    client: ClientSettings
    #: Root of the integration's nodes (under the client's namespace).
    prefix: str
    #: Names this process in owner data; None: host and pid say it.
    identifier: str | None = None
    #: The caller's own settings (``extra=``), by canonical name; defaults filled in.
    extra: Mapping[str, Any] = dataclasses.field(default_factory=lambda: types.MappingProxyType({}))
    #: The canonical names of the settings the source set; the others took their default.
    given: frozenset[str] = frozenset()


def _celery_name(key: str) -> str | None:
    """``zk_recipes_x`` or, from Django settings loaded with a namespace, ``NS_ZK_RECIPES_X``."""
    if key.startswith("zk_recipes_"):
        return key[len("zk_recipes_") :]
    match = re.fullmatch(r"[A-Z][A-Z0-9]*_ZK_RECIPES_([A-Z0-9_]+)", key)
    return match.group(1).lower() if match else None


def _entries(
    source: Mapping[str, Any], spelling: Spelling, alias: str, names: Sequence[str]
) -> dict[str, tuple[str, object]]:
    """Canonical name -> (key as written, value) of every setting the source has.

    Only the values of our own keys are looked up: a Celery ``app.conf`` loaded
    from Django's settings answers every other key by reading that setting,
    and some cannot be read (an empty SECRET_KEY raises, and the names that
    ``settings.configure()`` lists but does not hold raise KeyError).
    """
    items: Mapping[Any, object] = (
        _django_entry(source, alias) if spelling is Spelling.DJANGO else source
    )
    found: dict[str, tuple[str, object]] = {}
    for key in items:
        if not isinstance(key, str):
            if spelling is Spelling.DJANGO:
                raise ConfigurationError(
                    f'ZK_RECIPES["{alias}"] has a key {key!r} that is not a string'
                )
            continue
        if spelling is Spelling.DJANGO:
            name: str | None = key.lower()
        elif spelling is Spelling.CELERY:
            name = _celery_name(key)
        else:
            name = key[len("ZK_RECIPES_") :].lower() if key.startswith("ZK_RECIPES_") else None
        if name is None:
            continue
        if name not in names or key != _as_written(spelling, key, name):

            def spell(other: str, written: str = key) -> str:
                return _as_written(spelling, written, other)

            suggestion = did_you_mean(name, names, spell=spell)
            raise ConfigurationError(
                f"{spelling.where(key, alias=alias)} is not a setting{suggestion}; "
                "every setting is listed in docs/settings.md"
            )
        found[name] = (key, items[key])
    return found


def _as_written(spelling: Spelling, key: str, name: str) -> str:
    """The key of ``name`` in the style of ``key`` (a Celery namespace kept)."""
    if spelling is Spelling.CELERY and not key.startswith("zk_recipes_"):
        namespace = key[: key.index("_ZK_RECIPES_")]
        return f"{namespace}_ZK_RECIPES_{name.upper()}"
    return spelling.key(name)


def _django_entry(source: Mapping[str, Any], alias: str) -> Mapping[str, Any]:
    like = '{"default": {"HOSTS": "zk1:2181,zk2:2181"}}'
    if not isinstance(source, Mapping):
        raise ConfigurationError(
            f"ZK_RECIPES must be a dict of aliases, like ZK_RECIPES = {like}, "
            f"got {type(source).__name__}"
        )
    flat = flat_django_keys(source)
    if flat:
        # Without this, the first key reads as an alias, and the fix offered
        # would be {"HOSTS": {"HOSTS": ...}}.
        keys = ", ".join(f'"{key}": ...' for key in flat)
        raise ConfigurationError(
            f"ZK_RECIPES holds settings itself ({', '.join(flat)}), but it is a dict of "
            f'aliases, like DATABASES: write ZK_RECIPES = {{"default": {{{keys}}}}}'
        )
    if alias not in source:
        known = ", ".join(repr(a) for a in source) or "none"
        close = did_you_mean(alias, [str(a) for a in source]) if source else ""
        hint = close if "did you mean" in close else ""
        raise ConfigurationError(
            f"ZK_RECIPES has no alias {alias!r}{hint}; known aliases: {known}. "
            f"Add it like ZK_RECIPES = {like.replace('default', alias)}"
        )
    entry = source[alias]
    if not isinstance(entry, Mapping):
        raise ConfigurationError(
            f'ZK_RECIPES["{alias}"] must be a dict of settings, like {{"HOSTS": "zk1:2181"}}, '
            f"got {type(entry).__name__}"
        )
    return entry


def flat_django_keys(source: Mapping[Any, Any]) -> list[str]:
    """The keys of a Django ``ZK_RECIPES`` that are settings, not aliases: a flat dict.

    An alias's value is a dict of settings, so a key spelled as a setting
    (``HOSTS``) whose value is not a dict is the common slip of writing the
    settings without the alias around them.
    """
    names = {setting.name.upper() for setting in SETTINGS}
    return [
        key
        for key, value in source.items()
        if isinstance(key, str) and key in names and not isinstance(value, Mapping)
    ]


def _table(extra: Sequence[Setting]) -> dict[str, Setting]:
    table = {s.name: s for s in SETTINGS}
    for setting in extra:
        if not isinstance(setting, Setting):
            raise ConfigurationError(f"extra= takes Setting objects, got {setting!r}")
        if setting.name in table:
            raise ConfigurationError(
                f"extra setting {setting.name!r} is already a setting of zk_recipes"
            )
        table[setting.name] = setting
    return table


def read_settings(
    source: Mapping[str, Any],
    spelling: Spelling,
    *,
    alias: str = "default",
    default_prefix: str = DEFAULT_PREFIX,
    extra: Sequence[Setting] = (),
    defaults: Mapping[str, object] | None = None,
) -> RecipesConfig:
    """Read the settings of ``SETTINGS`` (and ``extra``) from a framework's configuration.

    ``source`` is, for ``DJANGO``, the whole ``ZK_RECIPES`` dict (``alias``
    picks the entry, as DATABASES does); for the others the whole
    configuration (``app.config``, ``app.conf``, ``os.environ``), of which only
    the keys with the spelling's prefix are read. ``defaults`` holds values
    from elsewhere, by canonical name and already checked (as ``read_settings``
    returns them: ``ClientSettings`` field values, the prefix, ...): each takes
    the place of the table's default where ``source`` does not set the
    setting, so a required ``hosts`` may come from there; ``given`` does not
    count them. Raises ConfigurationError naming the setting as written when a
    value is wrong, a key under the prefix is no setting, or ``hosts`` is
    missing from both.
    """
    if not isinstance(spelling, Spelling):
        raise ConfigurationError(f"spelling must be a zk_recipes.Spelling, got {spelling!r}")
    table = _table(extra)
    fallback = dict(defaults or {})
    unknown = sorted(set(fallback) - set(table))
    if unknown:
        raise ConfigurationError(
            f"defaults= takes settings by their canonical name, like 'hosts'; "
            f"not settings: {', '.join(map(repr, unknown))}"
        )
    entries = _entries(source, spelling, alias, list(table))
    parsed: dict[str, object] = {}
    for name, setting in table.items():
        key, value = entries.get(name, (spelling.key(name), None))
        if value is None or value == "":
            if name in fallback:
                continue
            if setting.required:
                raise ConfigurationError(
                    f"{spelling.where(key, alias=alias)} is not set: "
                    f"add {spelling.assignment(setting, alias=alias)}{_HINTS[spelling]}"
                )
            continue
        if spelling is Spelling.DJANGO and isinstance(value, Mapping):
            value = {(k.lower() if isinstance(k, str) else k): v for k, v in value.items()}
        text = spelling is Spelling.ENV and isinstance(value, str)
        try:
            parsed[name] = setting.parse(value, text)
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"{spelling.where(key, alias=alias)}: {_respelled(str(exc), spelling, alias)}; "
                f"for example {spelling.assignment(setting, alias=alias)}"
            ) from None
    values = {**fallback, **parsed}
    fields: dict[str, Any] = {
        s.client_field: values[n] for n, s in table.items() if s.client_field and n in values
    }
    try:
        client = ClientSettings(**fields)
    except ConfigurationError as exc:  # each value passed its check: a combination is wrong
        where = f'ZK_RECIPES["{alias}"]' if spelling is Spelling.DJANGO else f"{spelling.value}"
        raise ConfigurationError(f"{where} settings: {exc}") from None
    prefix = values.get("prefix", default_prefix)
    identifier = values.get("identifier")
    own = {n: values.get(n, table[n].default) for n in table if n not in _CORE_NAMES}
    return RecipesConfig(
        client=client,
        prefix=str(prefix),
        identifier=None if identifier is None else str(identifier),
        extra=types.MappingProxyType(own),
        given=frozenset(parsed),
    )


_CORE_NAMES = frozenset(s.name for s in SETTINGS)
#: A check's message names another setting as a keyword argument ("namespace="):
#: the reader writes it as the user's configuration spells it.
_MENTION = re.compile(r"\b(" + "|".join(sorted(_CORE_NAMES)) + r")=(?=\s|$)")


def _respelled(message: str, spelling: Spelling, alias: str) -> str:
    """``message`` with ``namespace=`` written as ``spelling`` keys that setting."""

    def spell(match: re.Match[str]) -> str:
        key = spelling.key(match.group(1))
        return key if spelling is Spelling.ENV else spelling.where(key, alias=alias)

    return _MENTION.sub(spell, message)


_HINTS = {
    Spelling.DJANGO: " to settings.py",
    Spelling.FLASK: " before init_app(app)",
    Spelling.CELERY: (
        " to the Celery configuration (CELERY_ZK_RECIPES_HOSTS in Django settings with "
        "namespace='CELERY')"
    ),
    Spelling.ENV: " to the environment",
}


def settings_from_env(
    environ: Mapping[str, str] | None = None, *, default_prefix: str = DEFAULT_PREFIX
) -> RecipesConfig:
    """Read the ``ZK_RECIPES_*`` environment variables (``os.environ`` unless given)."""
    return read_settings(
        os.environ if environ is None else environ, Spelling.ENV, default_prefix=default_prefix
    )
