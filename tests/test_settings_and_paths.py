"""Bad input is refused before anything is sent, with a message that says what to fix."""

from __future__ import annotations

import pytest

import zk_recipes
from zk_recipes import (
    Acl,
    ClientSettings,
    ConfigurationError,
    DataTooLargeError,
    ExponentialBackoffRetry,
    InvalidPathError,
    Perms,
    TlsOptions,
    digest_acl,
)
from zk_recipes._paths import (
    DEFAULT_MAX_DATA_BYTES,
    is_protected_name,
    join,
    name_of,
    new_protected_id,
    normalize_namespace,
    parent_of,
    protected_prefix,
    strip_protection,
    validate_data,
    validate_path,
    validate_writable_path,
)
from zk_recipes._settings import parse_hosts


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        (",", "empty"),
        ("zk1:2181,", "empty entry"),
        ("zk1:abc", "port must be a number"),
        ("zk1:0", "port must be a number"),
        ("zk1:70000", "port must be a number"),
        ("zk1:2181/app", "namespace="),
        ("::1:2181", "brackets"),
        ("[::1:2181", "unclosed"),
        (":2181", "no valid host"),
        ("zk 1:2181", "no valid host"),
        (2181, "must be a str"),
        (None, "must be a str"),
    ],
)
def test_malformed_hosts(hosts: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ClientSettings(hosts=hosts)  # type: ignore[arg-type]


def test_hosts_are_normalised() -> None:
    assert parse_hosts("zk1, zk2:2182,[::1]:2183") == (("zk1", 2181), ("zk2", 2182), ("::1", 2183))
    assert ClientSettings(hosts="zk1,zk2:2182").hosts == "zk1:2181,zk2:2182"
    assert ClientSettings(hosts=["a:1", "b:2"]).hosts == "a:1,b:2"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("session_timeout", 0, "positive"),
        ("session_timeout", -1.0, "positive"),
        ("session_timeout", float("nan"), "finite"),
        ("session_timeout", float("inf"), "finite"),
        ("session_timeout", "10", "number of seconds"),
        ("session_timeout", True, "number of seconds"),
        ("connection_timeout", 0.0, "positive"),
        ("simulated_expiry_fraction", 0, r"\(0, 1\]"),
        ("simulated_expiry_fraction", 1.5, r"\(0, 1\]"),
        ("retry_policy", "forever", "RetryPolicy"),
        ("auth", [("digest",)], "pairs"),
        ("auth", [("digest", 1)], "pairs"),
        ("sasl", {"username": "u"}, "mechanism"),
        ("default_acl", [], "non-empty"),
        ("default_acl", [("world", "anyone")], "Acl"),
        ("tls", {"ca_file": "x"}, "TlsOptions"),
        ("read_only", "yes", "True or False"),
        ("max_data_bytes", 0, "positive int"),
        ("namespace", "a//b", "empty segment"),
        ("namespace", "zookeeper", "reserved"),
        ("namespace", 5, "must be a str"),
    ],
)
def test_bad_settings(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ClientSettings(hosts="127.0.0.1:2181", **{field: value})  # type: ignore[arg-type]


def test_settings_defaults_and_replace() -> None:
    settings = ClientSettings(hosts="127.0.0.1:2181", namespace="app")
    assert settings.namespace == "/app"
    assert settings.session_timeout == 10.0
    assert 0 < settings.simulated_expiry_fraction < 1
    assert isinstance(settings.retry_policy, ExponentialBackoffRetry)
    changed = settings.replace(session_timeout=4)
    assert changed.session_timeout == 4.0
    assert changed.namespace == "/app"
    with pytest.raises(ConfigurationError):
        settings.replace(session_timeout=-4)
    tls = ClientSettings(hosts="h:1", tls=TlsOptions(ca_file="/ca.pem"))
    assert tls.tls is not None
    assert tls.tls.check_hostname


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("relative/path", "relative"),
        ("", "relative"),
        ("/trailing/", "trailing slash"),
        ("/a//b", "empty segment"),
        ("/a/./b", "relative segment"),
        ("/a/../b", "relative segment"),
        ("/nul\x00byte", "U\\+0000"),
        ("/bell\x07", "U\\+0007"),
        ("/private\ue000use", "U\\+E000"),
        (b"/bytes", "must be a str"),
        (None, "must be a str"),
    ],
)
def test_invalid_paths(path: object, message: str) -> None:
    with pytest.raises(InvalidPathError, match=message):
        validate_path(path)


def test_every_problem_of_a_path_is_named_at_once() -> None:
    """One round of fixing, not one per problem (issue 23, item 6)."""
    with pytest.raises(InvalidPathError) as caught:
        validate_path("a//b/../c/./\x01/")
    message = str(caught.value)
    for problem in (
        "is relative",
        "drop the trailing slash",
        "has an empty segment ('//')",
        "has relative segments '..' and '.'",
        "U+0001",
    ):
        assert problem in message
    with pytest.raises(ConfigurationError) as settings_error:
        ClientSettings(hosts="h:1", namespace="shop//eu/../")
    message = str(settings_error.value)
    assert "namespace '/shop//eu/../'" in message
    assert "trailing slash" in message
    assert "empty segment" in message
    assert "relative segment '..'" in message
    # The public helper is the same check, writable or not.
    assert zk_recipes.validate_path("/zookeeper") == "/zookeeper"
    with pytest.raises(InvalidPathError, match="reserved"):
        zk_recipes.validate_path("/zookeeper/x", writable=True)


@pytest.mark.parametrize("path", ["/", "/zookeeper", "/zookeeper/quota"])
def test_reserved_paths_are_not_writable(path: str) -> None:
    validate_path(path)
    with pytest.raises(InvalidPathError, match="reserved"):
        validate_writable_path(path)


def test_invalid_path_error_is_also_a_value_error() -> None:
    with pytest.raises(ValueError, match="relative"):
        validate_path("x")


def test_data_limits() -> None:
    assert validate_data(b"x" * DEFAULT_MAX_DATA_BYTES, path="/p") == b"x" * DEFAULT_MAX_DATA_BYTES
    assert validate_data(bytearray(b"ab"), path="/p") == b"ab"
    with pytest.raises(DataTooLargeError, match=r"1,048,577 bytes.*jute\.maxbuffer"):
        validate_data(b"x" * (1024 * 1024 + 1), path="/p")
    with pytest.raises(TypeError, match="encode text first"):
        validate_data("text", path="/p")


def test_path_helpers() -> None:
    assert join("/a", "b", "c") == "/a/b/c"
    assert join("/", "a") == "/a"
    assert parent_of("/a/b") == "/a"
    assert parent_of("/a") == "/"
    assert name_of("/a/b") == "b"
    assert normalize_namespace("app") == "/app"
    assert normalize_namespace("/app/sub") == "/app/sub"
    assert normalize_namespace(None) == ""


def test_protected_names_follow_curator() -> None:
    pid = new_protected_id()
    assert len(pid) == 36
    assert pid == pid.lower()
    name = protected_prefix(pid) + "lock-0000000007"
    assert name.startswith("_c_")
    assert name[39] == "-"
    assert is_protected_name(name)
    assert strip_protection(name) == "lock-0000000007"
    assert not is_protected_name("lock-0000000007")
    assert not is_protected_name("_c_not-a-uuid-at-all-but-long-enough-to-pass-x")
    assert strip_protection("plain") == "plain"


def test_acls() -> None:
    entry = digest_acl("user", "secret", Perms.READ | Perms.WRITE)
    assert entry == Acl(Perms.READ | Perms.WRITE, "digest", "user:5w9W4eL3797Y4Wq8AcKUPPk8ha4=")
    assert Perms.ALL == Perms.READ | Perms.WRITE | Perms.CREATE | Perms.DELETE | Perms.ADMIN
