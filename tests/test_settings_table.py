"""One table of settings, four spellings: the same values give the same client, bad ones say where.

Each spelling's configuration is built from one table of values (``VALUES``)
through ``Spelling.key``, so the test cannot spell a key differently from
the reader. Bad values are tried in every spelling, and the error must name
the setting the way that framework writes it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from zk_recipes import (
    CREATOR_ALL_ACL,
    SETTINGS,
    Acl,
    BoundedExponentialBackoffRetry,
    ClientSettings,
    ConfigurationError,
    Perms,
    RecipesConfig,
    RetryForever,
    Setting,
    Spelling,
    TlsOptions,
    ZkClient,
    digest_acl,
    read_settings,
    settings_from_env,
)

ALL_SPELLINGS = list(Spelling)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A self-signed certificate and its key (the certificate is its own CA), and junk."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    directory = tmp_path_factory.mktemp("certs")
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-keyout", "client.key", "-out", "client.pem", "-subj", "/CN=zk-recipes test"),
        ],
        cwd=directory,
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    (directory / "junk.pem").write_text("not a certificate\n")
    return directory


def _values(certs: Path) -> dict[str, object]:
    """A value for every setting, none of them the default, as Python configurations write it."""
    return {
        "hosts": "zk1:2181,zk2",
        "namespace": "shop",
        "session_timeout": 6.5,
        "connection_timeout": 4,
        "retry": {
            "policy": "BoundedExponentialBackoffRetry",
            "base_sleep": 0.2,
            "max_sleep": 2.0,
            "max_retries": 7,
        },
        "auth": ["digest:app:secret", "digest:ops:pw"],
        "sasl": {"mechanism": "DIGEST-MD5", "username": "app", "password": "pw"},
        "default_acl": "CREATOR_ALL_ACL",
        "tls": {
            "ca_file": str(certs / "client.pem"),
            "cert_file": str(certs / "client.pem"),
            "key_file": str(certs / "client.key"),
            "check_hostname": False,
        },
        "read_only": False,
        "simulated_expiry_fraction": 0.5,
        "max_data_bytes": 500_000,
        "prefix": "/jobs",
        "identifier": "web-1",
    }


def _text(value: object) -> str:
    """A value as an environment variable holds it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (Mapping, list)):
        return json.dumps(value)
    return str(value)


def _source(spelling: Spelling, values: Mapping[str, object]) -> dict[str, Any]:
    """A whole configuration in ``spelling`` holding ``values``, among unrelated keys."""
    if spelling is Spelling.DJANGO:
        # Django settings are upper case all the way down: accept it in TLS and RETRY too.
        entry = {
            spelling.key(name): (
                {k.upper(): v for k, v in value.items()}
                if name in ("tls", "retry") and isinstance(value, Mapping)
                else value
            )
            for name, value in values.items()
        }
        return {"default": entry, "replica": {"HOSTS": "other:2181"}}
    if spelling is Spelling.ENV:
        env = {spelling.key(name): _text(value) for name, value in values.items()}
        return {"PATH": "/usr/bin", "ZK_HOSTS": "ignored:1", **env}
    unrelated = {"SECRET_KEY": "x"} if spelling is Spelling.FLASK else {"broker_url": "memory://"}
    return {**unrelated, **{spelling.key(name): value for name, value in values.items()}}


def _read(spelling: Spelling, values: Mapping[str, object], **options: Any) -> RecipesConfig:
    return read_settings(_source(spelling, values), spelling, **options)


# -- the table -------------------------------------------------------------------------------


def test_the_table_covers_every_client_field_once_with_its_default() -> None:
    fields = ClientSettings.__dataclass_fields__
    by_field = {s.client_field: s for s in SETTINGS if s.client_field}
    assert sorted(by_field) == sorted(fields)
    assert len({s.name for s in SETTINGS}) == len(SETTINGS)
    assert [s.name for s in SETTINGS if s.client_field is None] == ["prefix", "identifier"]
    assert [s.name for s in SETTINGS if s.required] == ["hosts"]
    defaults = ClientSettings("h")
    for field, setting in by_field.items():
        if not setting.required:
            assert getattr(defaults, field) == setting.default, field
    # Each example is a value its own check accepts (the docs and messages show them).
    for setting in SETTINGS:
        if setting.name != "tls":  # its example names a file this machine need not have
            setting.parse(setting.example, False)


def test_each_spelling_derives_its_keys_from_the_name() -> None:
    assert Spelling.DJANGO.key("session_timeout") == "SESSION_TIMEOUT"
    assert Spelling.FLASK.key("session_timeout") == "ZK_RECIPES_SESSION_TIMEOUT"
    assert Spelling.CELERY.key("session_timeout") == "zk_recipes_session_timeout"
    assert Spelling.ENV.key("retry") == "ZK_RECIPES_RETRY"


# -- the same values, four spellings ---------------------------------------------------------


def test_every_spelling_gives_the_same_settings(certs: Path) -> None:
    values = _values(certs)
    expected = ClientSettings(
        hosts="zk1:2181,zk2:2181",
        namespace="/shop",
        session_timeout=6.5,
        connection_timeout=4.0,
        retry_policy=BoundedExponentialBackoffRetry(0.2, 2.0, 7),
        auth=(("digest", "app:secret"), ("digest", "ops:pw")),
        sasl={"mechanism": "DIGEST-MD5", "username": "app", "password": "pw"},
        default_acl=CREATOR_ALL_ACL,
        tls=TlsOptions(
            ca_file=str(certs / "client.pem"),
            cert_file=str(certs / "client.pem"),
            key_file=str(certs / "client.key"),
            check_hostname=False,
        ),
        read_only=False,
        simulated_expiry_fraction=0.5,
        max_data_bytes=500_000,
    )
    configs = {spelling: _read(spelling, values) for spelling in ALL_SPELLINGS}
    for spelling, config in configs.items():
        assert config.client == expected, spelling
        assert (config.prefix, config.identifier) == ("/jobs", "web-1"), spelling
        assert config.given == set(values), spelling
        assert dict(config.extra) == {}


def test_unset_settings_take_their_defaults_and_the_callers_prefix() -> None:
    for spelling in ALL_SPELLINGS:
        config = _read(spelling, {"hosts": "zk1"}, default_prefix="/celery")
        assert config.client == ClientSettings("zk1:2181"), spelling
        assert (config.prefix, config.identifier, config.given) == (
            "/celery",
            None,
            frozenset({"hosts"}),
        )
    # An empty value is no value: an empty environment variable, a setting read from one.
    env = {"ZK_RECIPES_HOSTS": "zk1", "ZK_RECIPES_NAMESPACE": "", "ZK_RECIPES_RETRY": ""}
    assert settings_from_env(env) == settings_from_env({"ZK_RECIPES_HOSTS": "zk1"})
    assert settings_from_env(env).prefix == "/zk-recipes"


def test_the_environment_takes_the_short_text_forms() -> None:
    config = settings_from_env(
        {
            "ZK_RECIPES_HOSTS": "zk1,zk2:2182",
            "ZK_RECIPES_AUTH": "digest:app:secret, digest:ops:pw",
            "ZK_RECIPES_DEFAULT_ACL": "auth::cdrwa,world:anyone:r",
            "ZK_RECIPES_READ_ONLY": "no",
            "ZK_RECIPES_TLS": "false",
            "ZK_RECIPES_MAX_DATA_BYTES": "4096",
        }
    )
    assert config.client.auth == (("digest", "app:secret"), ("digest", "ops:pw"))
    assert config.client.default_acl == (
        Acl(Perms.ALL, "auth", ""),
        Acl(Perms.READ, "world", "anyone"),
    )
    assert config.client.read_only is False
    assert config.client.tls is None
    assert config.client.max_data_bytes == 4096
    assert (
        settings_from_env({"ZK_RECIPES_HOSTS": "zk1", "ZK_RECIPES_TLS": "true"}).client.tls
        == TlsOptions()
    )


def test_python_configurations_may_give_the_objects(certs: Path) -> None:
    tls = TlsOptions(ca_file=str(certs / "client.pem"))
    acl = (digest_acl("app", "secret"),)
    for spelling in (Spelling.DJANGO, Spelling.FLASK, Spelling.CELERY):
        values = {
            "hosts": ["zk1:2181", "zk2:2181"],
            "retry": RetryForever(1.0),
            "tls": tls,
            "default_acl": acl,
            "auth": [("digest", "app:secret")],
        }
        client = _read(spelling, values).client
        assert client.hosts == "zk1:2181,zk2:2181"
        assert client.retry_policy == RetryForever(1.0)
        assert (client.tls, client.default_acl) == (tls, acl)
        assert client.auth == (("digest", "app:secret"),)


@pytest.mark.parametrize("spelling", ALL_SPELLINGS)
def test_numeric_strings_are_numbers_in_every_spelling(spelling: Spelling) -> None:
    """Settings built from os.environ hold "10": each spelling reads it as the environment does."""
    strings = {
        "hosts": "zk1:2181",
        "session_timeout": "6.5",
        "connection_timeout": " 4 ",
        "simulated_expiry_fraction": "0.5",
        "max_data_bytes": "500000",
    }
    client = _read(spelling, strings).client
    assert client.session_timeout == 6.5
    assert client.connection_timeout == 4.0
    assert client.simulated_expiry_fraction == 0.5
    assert client.max_data_bytes == 500_000
    assert isinstance(client.max_data_bytes, int)
    with pytest.raises(ConfigurationError, match=r"must be a whole number, got '1\.5'"):
        _read(spelling, {**strings, "max_data_bytes": "1.5"})
    with pytest.raises(ConfigurationError, match="positive number of seconds, got 'soon'"):
        _read(spelling, {**strings, "session_timeout": "soon"})


@pytest.mark.parametrize("spelling", [Spelling.DJANGO, Spelling.FLASK, Spelling.CELERY])
def test_computed_floats_are_rounded_in_messages(spelling: Spelling) -> None:
    with pytest.raises(ConfigurationError) as caught:
        _read(spelling, {"hosts": "h", "simulated_expiry_fraction": 0.7 * 1.5})
    assert "got 1.05;" in str(caught.value)
    assert "1.0499999" not in str(caught.value)
    with pytest.raises(ConfigurationError) as caught:
        _read(spelling, {"hosts": "h", "session_timeout": 0.1 * 3 - 1})
    assert "got -0.7;" in str(caught.value)
    retry = {"policy": "ExponentialBackoffRetry", "base_sleep": 0.1 * 3, "max_retries": 2}
    with pytest.raises(ConfigurationError) as caught:
        _read(spelling, {"hosts": "h", "retry": {**retry, "max_sleep": 0.2}})
    assert "max_sleep must be None or >= base_sleep (0.3), got 0.2" in str(caught.value)
    assert "ExponentialBackoffRetry: ExponentialBackoffRetry" not in str(caught.value)
    # Rounded onto the bound it broke, a value is shown whole.
    with pytest.raises(ConfigurationError, match=r"got 1\.0000000000000002;"):
        _read(spelling, {"hosts": "h", "simulated_expiry_fraction": 1.0000000000000002})


def test_a_flat_django_dict_gets_the_alias_around_it() -> None:
    with pytest.raises(ConfigurationError) as caught:
        read_settings({"HOSTS": "zk1:2181", "SESSION_TIMEOUT": 5}, Spelling.DJANGO)
    message = str(caught.value)
    assert 'ZK_RECIPES = {"default": {"HOSTS": ..., "SESSION_TIMEOUT": ...}}' in message
    assert '{"HOSTS": {"HOSTS"' not in message
    # Read for the alias its first key looks like, it says the same.
    with pytest.raises(ConfigurationError, match=r'\{"default": \{"HOSTS": \.\.\.\}\}'):
        read_settings({"HOSTS": "zk1:2181"}, Spelling.DJANGO, alias="HOSTS")


def test_django_aliases_pick_their_entry() -> None:
    source = {"default": {"HOSTS": "zk1"}, "locks": {"HOSTS": "zk9", "NAMESPACE": "locks"}}
    config = read_settings(source, Spelling.DJANGO, alias="locks")
    assert (config.client.hosts, config.client.namespace) == ("zk9:2181", "/locks")


def test_celery_keys_from_django_settings_with_a_namespace() -> None:
    # app.config_from_object("django.conf:settings", namespace="CELERY") shows these keys.
    source = {"CELERY_ZK_RECIPES_HOSTS": "zk1", "CELERY_ZK_RECIPES_SESSION_TIMEOUT": 3}
    config = read_settings(source, Spelling.CELERY)
    assert (config.client.hosts, config.client.session_timeout) == ("zk1:2181", 3.0)
    with pytest.raises(
        ConfigurationError,
        match=r"CELERY_ZK_RECIPES_SESION_TIMEOUT is not a setting "
        r"\(did you mean 'CELERY_ZK_RECIPES_SESSION_TIMEOUT'\?\)",
    ):
        read_settings({**source, "CELERY_ZK_RECIPES_SESION_TIMEOUT": 3}, Spelling.CELERY)


def test_extra_settings_are_read_beside_the_table() -> None:
    def mode(value: object, text: bool) -> str:
        if value not in ("a", "b"):
            raise ConfigurationError(f"must be 'a' or 'b', got {value!r}")
        return str(value)

    extra = [
        Setting("mode", "'a' or 'b'", "a", "A mode.", mode, "b"),
        Setting("other", "str", None, "Another.", lambda v, t: v, "x"),
    ]
    config = _read(Spelling.CELERY, {"hosts": "zk1", "mode": "b"}, extra=extra)
    assert dict(config.extra) == {"mode": "b", "other": None}
    with pytest.raises(ConfigurationError, match=r"^zk_recipes_mode: must be 'a' or 'b'"):
        _read(Spelling.CELERY, {"hosts": "zk1", "mode": "c"}, extra=extra)
    with pytest.raises(ConfigurationError, match="already a setting"):
        _read(Spelling.CELERY, {"hosts": "zk1"}, extra=[SETTINGS[0]])
    with pytest.raises(ConfigurationError, match="lower-case words"):
        Setting("Mode", "str", None, "Bad name.", mode, "a")


class _ReadOnlyOurs(Mapping[str, object]):
    """A configuration whose other keys cannot be read, like app.conf over Django's settings."""

    def __init__(self, ours: Mapping[str, object]) -> None:
        self._ours = dict(ours)

    def __iter__(self) -> Iterator[str]:
        return iter(["SECRET_KEY", "__builtins__", *self._ours])

    def __len__(self) -> int:
        return len(self._ours) + 2

    def __getitem__(self, key: str) -> object:
        if key not in self._ours:
            raise KeyError(f"{key} cannot be read")
        return self._ours[key]


def test_only_the_values_of_our_keys_are_read() -> None:
    source = _ReadOnlyOurs({"CELERY_ZK_RECIPES_HOSTS": "zk1", "zk_recipes_namespace": "jobs"})
    config = read_settings(source, Spelling.CELERY)
    assert (config.client.hosts, config.client.namespace) == ("zk1:2181", "/jobs")


def test_defaults_from_elsewhere_fill_what_the_source_leaves_out() -> None:
    """A value from another configuration: a required hosts may come from there."""
    elsewhere = {"hosts": "zk9:2181", "namespace": "/shop", "session_timeout": 4.0}
    for spelling in ALL_SPELLINGS:
        config = _read(spelling, {"identifier": "web-1"}, defaults=elsewhere)
        assert config.client == ClientSettings("zk9:2181", "/shop", 4.0), spelling
        assert (config.identifier, config.given) == ("web-1", frozenset({"identifier"}))
        # The source's own value wins over the one from elsewhere.
        config = _read(spelling, {"session_timeout": 6}, defaults=elsewhere)
        assert (config.client.hosts, config.client.session_timeout) == ("zk9:2181", 6.0)
        assert config.given == {"session_timeout"}
    with pytest.raises(ConfigurationError, match=r"^zk_recipes_hosts is not set"):
        _read(Spelling.CELERY, {}, defaults={"namespace": "/shop"})
    with pytest.raises(ConfigurationError, match=r"canonical name.*'HOSTS'"):
        _read(Spelling.CELERY, {}, defaults={"HOSTS": "zk1"})


# -- bad values, in every spelling ------------------------------------------------------------


def _where(spelling: Spelling, name: str) -> str:
    """The setting's name in messages, as the tests expect it written."""
    return {
        Spelling.DJANGO: f'ZK_RECIPES["default"]["{name.upper()}"]',
        Spelling.FLASK: f"ZK_RECIPES_{name.upper()}",
        Spelling.CELERY: f"zk_recipes_{name}",
        Spelling.ENV: f"environment variable ZK_RECIPES_{name.upper()}",
    }[spelling]


#: (setting, the bad value, what the message says); the environment gets ``_text(value)``.
BAD: list[tuple[str, object, str]] = [
    ("hosts", "zk1:2181;zk2:2181", "separate them with commas"),
    ("hosts", "zk1:99999", "port must be a number"),
    ("namespace", "a//b", "empty segment"),
    ("session_timeout", "ten", "positive number of seconds"),
    ("session_timeout", -1, "positive number of seconds"),
    ("connection_timeout", 0, "positive number of seconds"),
    ("read_only", "maybe", "true or false"),
    ("max_data_bytes", 1.5, "whole number"),
    ("max_data_bytes", 0, "above zero"),
    ("simulated_expiry_fraction", 2, r"in \(0, 1\]"),
    ("retry", 5, "a dict naming the policy"),
    ("retry", {"base_sleep": 0.1}, 'needs "policy"'),
    ("retry", {"policy": "ExponentialBackof"}, "did you mean 'ExponentialBackoffRetry'"),
    ("retry", {"policy": "RetryNTimes", "n": 3}, "RetryNTimes needs 'sleep' too"),
    ("retry", {"policy": "RetryNTimes", "n": 3, "sleap": 1}, "did you mean 'sleep'"),
    ("retry", {"policy": "RetryNTimes", "n": -1, "sleep": 1}, "RetryNTimes: .*n"),
    ("auth", ["digest"], "scheme:credential"),
    ("sasl", {"username": "app"}, "mechanism"),
    ("default_acl", "CREATOR_ALL", "did you mean 'CREATOR_ALL_ACL'"),
    ("default_acl", ["world:anyone:xyz"], "scheme:id:perms"),
    ("tls", {"ca_file": "/no/such/ca.pem"}, "names no file"),
    ("tls", {"ca_flie": "/etc/ca.pem"}, "did you mean 'ca_file'"),
    ("tls", {"verify_certs": False}, "check_hostname"),
    ("tls", 7, "must be a dict"),
    ("prefix", "jobs", "absolute znode path"),
    ("prefix", "/", "absolute znode path"),
]


def _bad_id(case: tuple[str, object, str]) -> str:
    return f"{case[0]}={case[1]!r}"[:40]


@pytest.mark.parametrize("spelling", ALL_SPELLINGS, ids=lambda s: s.name)
@pytest.mark.parametrize("case", BAD, ids=_bad_id)
def test_a_bad_value_names_the_setting_in_its_spelling(
    spelling: Spelling, case: tuple[str, object, str]
) -> None:
    name, value, message = case
    values = {"hosts": "zk1", name: value}
    with pytest.raises(ConfigurationError, match=re.escape(_where(spelling, name)) + ": ") as info:
        _read(spelling, values)
    assert re.search(message, str(info.value), flags=re.IGNORECASE), str(info.value)
    assert "for example" in str(info.value)


@pytest.mark.parametrize("spelling", ALL_SPELLINGS, ids=lambda s: s.name)
def test_bad_tls_files_fail_when_read(spelling: Spelling, certs: Path) -> None:
    cases: list[tuple[dict[str, object], str]] = [
        ({"ca_file": str(certs)}, "names no file"),  # a directory
        ({"ca_file": str(certs / "junk.pem")}, "holds no PEM certificate"),
        ({"cert_file": str(certs / "client.pem")}, "needs both"),
        (
            {"cert_file": str(certs / "client.pem"), "key_file": str(certs / "junk.pem")},
            "do not make a certificate and its key",
        ),
    ]
    for tls, message in cases:
        with pytest.raises(ConfigurationError, match=re.escape(_where(spelling, "tls"))) as info:
            _read(spelling, {"hosts": "zk1", "tls": tls})
        assert message in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_tls_file_fails_when_read(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    ca.chmod(0)
    with pytest.raises(ConfigurationError, match="cannot read"):
        settings_from_env({"ZK_RECIPES_HOSTS": "zk1", "ZK_RECIPES_TLS": f'{{"ca_file": "{ca}"}}'})


def test_read_only_servers_are_refused_with_the_reason() -> None:
    for spelling in ALL_SPELLINGS:
        with pytest.raises(ConfigurationError, match="read_only=True is not supported") as info:
            _read(
                spelling,
                {"hosts": "zk1", "read_only": "true" if spelling is Spelling.ENV else True},
            )
        assert "cannot be proven" in str(info.value)


def test_wrong_types_in_python_configurations() -> None:
    for spelling in (Spelling.DJANGO, Spelling.FLASK, Spelling.CELERY):
        for name, value, message in [
            ("session_timeout", [10], "got list [10]"),  # a numeric string is fine
            ("read_only", 1, "True or False"),
            ("identifier", 5, "must be a string"),
            ("namespace", 5, "must be a string"),
            ("hosts", 2181, "must be a string"),
        ]:
            with pytest.raises(ConfigurationError, match=re.escape(_where(spelling, name))) as info:
                _read(spelling, {"hosts": "zk1", name: value})
            assert message in str(info.value)


def test_bad_json_in_the_environment() -> None:
    with pytest.raises(
        ConfigurationError, match=r"^environment variable ZK_RECIPES_RETRY: is not valid JSON"
    ):
        settings_from_env({"ZK_RECIPES_HOSTS": "zk1", "ZK_RECIPES_RETRY": "{policy: x}"})


@pytest.mark.parametrize("spelling", ALL_SPELLINGS, ids=lambda s: s.name)
def test_an_unknown_key_says_what_was_meant(spelling: Spelling) -> None:
    source = _source(spelling, {"hosts": "zk1", "sesion_timeout": 3})
    suggestion = spelling.key("session_timeout")
    with pytest.raises(
        ConfigurationError,
        match=re.escape(f"{_where(spelling, 'sesion_timeout')} is not a setting ")
        + re.escape(f"(did you mean {suggestion!r}?)"),
    ):
        read_settings(source, spelling)


@pytest.mark.parametrize("spelling", ALL_SPELLINGS, ids=lambda s: s.name)
def test_missing_hosts_says_how_to_set_them(spelling: Spelling) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(_where(spelling, "hosts"))) as info:
        _read(spelling, {"namespace": "shop"})
    assert "is not set: add " in str(info.value)
    assert "zk1:2181,zk2:2181,zk3:2181" in str(info.value)


def test_django_mistakes_in_the_dict_itself() -> None:
    bad: list[tuple[object, str, str]] = [
        ({"default": {"HOSTS": "zk1"}, "locks": {}}, "lokcs", "did you mean 'locks'?"),
        ({"default": {"HOSTS": "zk1"}}, "jobs", "known aliases: 'default'"),
        ({"default": {"hosts": "zk1"}}, "default", "did you mean 'HOSTS'?"),
        ({"default": "zk1:2181"}, "default", 'ZK_RECIPES["default"] must be a dict'),
        (["zk1:2181"], "default", "ZK_RECIPES must be a dict of aliases"),
    ]
    for source, alias, message in bad:
        with pytest.raises(ConfigurationError) as info:
            read_settings(source, Spelling.DJANGO, alias=alias)  # type: ignore[arg-type]
        assert message in str(info.value)


# -- a real client from the environment -------------------------------------------------------


def test_a_client_connects_with_settings_from_the_environment(
    zk_hosts: str,
    zk_namespace: str,
    zk_client: ZkClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in {
        "ZK_RECIPES_HOSTS": zk_hosts,
        "ZK_RECIPES_NAMESPACE": zk_namespace,
        "ZK_RECIPES_SESSION_TIMEOUT": "4",
        "ZK_RECIPES_CONNECTION_TIMEOUT": "10",
        "ZK_RECIPES_RETRY": '{"policy": "RetryNTimes", "n": 3, "sleep": 0.1}',
        "ZK_RECIPES_IDENTIFIER": "cron-7",
    }.items():
        monkeypatch.setenv(key, value)
    config = settings_from_env()
    assert config.identifier == "cron-7"
    with ZkClient(settings=config.client) as client:
        client.create(f"{config.prefix}/hello", b"from the environment", parents=True)
    # Another client of the same namespace sees it: the namespace was the test's.
    assert zk_client.get(f"{config.prefix}/hello")[0] == b"from the environment"
