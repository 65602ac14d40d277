"""The extension: app factory, several apps, config over constructor, fix-it errors, fork."""

from __future__ import annotations

import pytest
from flask import Flask

from tests.integrations._fork import assert_a_fork_gets_its_own_session
from zk_recipes import (
    ConfigurationError,
    ConnectionState,
    RecipeUsageError,
    RetryNTimes,
)
from zk_recipes_flask import ZkRecipes, close_all

from .conftest import SESSION_TIMEOUT, AppFactory


def test_app_factory_init_app_and_the_client_in_an_app_context(make_app: AppFactory) -> None:
    zk = ZkRecipes()
    app, _ = make_app(zk)
    assert "zk_recipes" in app.extensions
    with app.app_context():
        client = zk.client
        assert client.state is ConnectionState.CONNECTED
        assert zk.client is client  # one client per (app, process), not one per use
    with app.test_request_context("/"):
        assert zk.client is client
    assert zk.get_client(app) is client
    assert client.negotiated_session_timeout == SESSION_TIMEOUT


def test_one_extension_serves_two_apps_with_their_own_namespaces(
    make_app: AppFactory, zk_namespace: str
) -> None:
    zk = ZkRecipes()
    first, _ = make_app(zk, name="first", ZK_RECIPES_NAMESPACE=zk_namespace + "/first")
    second, _ = make_app(zk, name="second", ZK_RECIPES_NAMESPACE=zk_namespace + "/second")
    one, two = zk.get_client(first), zk.get_client(second)
    assert one is not two
    assert one.session_id != two.session_id
    one.create("/mine", b"first", parents=True)
    assert two.exists("/mine") is None
    with first.app_context():
        assert zk.client is one
    with second.app_context():
        assert zk.client is two
        assert zk.config().client.namespace == zk_namespace + "/second"


def test_config_beats_constructor_options(make_app: AppFactory, zk_namespace: str) -> None:
    zk = ZkRecipes(
        session_timeout=9.0,
        namespace="from-the-constructor",
        retry={"policy": "RetryNTimes", "n": 2, "sleep": 0.1},
    )
    app, _ = make_app(zk)  # the config sets SESSION_TIMEOUT and NAMESPACE
    config = zk.config(app)
    assert config.client.session_timeout == SESSION_TIMEOUT
    assert config.client.namespace == zk_namespace
    assert isinstance(config.client.retry_policy, RetryNTimes)  # the config left it out
    assert config.given >= {"hosts", "namespace", "session_timeout"}
    assert "retry" not in config.given


def test_constructor_options_alone_configure_the_app(zk_hosts: str, zk_namespace: str) -> None:
    app = Flask("bare")
    zk = ZkRecipes(app, hosts=zk_hosts, namespace=zk_namespace, session_timeout=SESSION_TIMEOUT)
    try:
        assert zk.get_client(app).state is ConnectionState.CONNECTED
    finally:
        zk.close(app)


def test_missing_init_app_and_missing_app_context_say_the_fix() -> None:
    zk = ZkRecipes()
    app = Flask("forgotten")
    with pytest.raises(RecipeUsageError, match=r"call zk\.init_app\(app\)"):
        zk.get_client(app)
    with app.app_context(), pytest.raises(RecipeUsageError, match="not initialised"):
        _ = zk.client
    with pytest.raises(RecipeUsageError, match="no app context"):
        _ = zk.client


def test_init_app_checks_the_settings_without_connecting() -> None:
    app = Flask("typo")
    app.config.update(ZK_RECIPES_HOSTS="127.0.0.1:1", ZK_RECIPES_SESION_TIMEOUT=5)
    with pytest.raises(ConfigurationError, match=r"did you mean 'ZK_RECIPES_SESSION_TIMEOUT'"):
        ZkRecipes(app)
    app = Flask("nohosts")
    with pytest.raises(ConfigurationError, match=r"app.config\['ZK_RECIPES_HOSTS'\]"):
        ZkRecipes(app)
    with pytest.raises(ConfigurationError, match=r"ZkRecipes\(sesion_timeout=...\)"):
        ZkRecipes(sesion_timeout=3)
    with pytest.raises(ConfigurationError, match=r"ZkRecipes\(session_timeout=...\)"):
        ZkRecipes(session_timeout="soon")
    # Settings are read at init_app, but nothing connects until first use.
    app = Flask("lazy")
    zk = ZkRecipes(app, hosts="127.0.0.1:1")
    assert zk.state(app).process_client.current() is None


def test_numeric_strings_from_the_environment_are_numbers(make_app: AppFactory) -> None:
    """``app.config.from_prefixed_env()`` and ``os.environ`` give strings: they are read."""
    zk = ZkRecipes(connection_timeout="4")  # the constructor's options too
    app, _ = make_app(
        zk,
        ZK_RECIPES_SESSION_TIMEOUT=str(SESSION_TIMEOUT),
        ZK_RECIPES_SIMULATED_EXPIRY_FRACTION="0.5",
        ZK_RECIPES_MAX_DATA_BYTES="65536",
    )
    client = zk.config(app).client
    assert client.session_timeout == SESSION_TIMEOUT
    assert client.connection_timeout == 4.0
    assert client.simulated_expiry_fraction == 0.5
    assert client.max_data_bytes == 65536
    assert zk.get_client(app).negotiated_session_timeout == SESSION_TIMEOUT


def test_a_computed_float_is_rounded_in_the_message() -> None:
    app = Flask("computed")
    app.config.update(ZK_RECIPES_HOSTS="127.0.0.1:1", ZK_RECIPES_SESSION_TIMEOUT=0.1 * 3 - 1)
    with pytest.raises(ConfigurationError) as caught:
        ZkRecipes(app)
    assert "ZK_RECIPES_SESSION_TIMEOUT: must be a positive number of seconds, got -0.7;" in str(
        caught.value
    )


def test_init_app_twice_and_another_extensions_app_are_refused(make_app: AppFactory) -> None:
    app, zk = make_app()
    with pytest.raises(RecipeUsageError, match="already initialised"):
        zk.init_app(app)
    with pytest.raises(RecipeUsageError, match="another ZkRecipes instance"):
        ZkRecipes().get_client(app)


def test_a_forked_child_gets_its_own_session_and_leaves_the_parents_alone(
    make_app: AppFactory,
) -> None:
    app, zk = make_app()
    assert_a_fork_gets_its_own_session(lambda: zk.get_client(app))


def test_close_all_ends_every_apps_session_and_the_next_use_opens_a_new_one(
    make_app: AppFactory, zk_namespace: str
) -> None:
    zk = ZkRecipes()
    first, _ = make_app(zk, name="first")
    second, _ = make_app(zk, name="second", ZK_RECIPES_NAMESPACE=zk_namespace + "/b")
    clients = [zk.get_client(first), zk.get_client(second)]
    close_all()
    assert [c.state for c in clients] == [ConnectionState.CLOSED] * 2
    again = zk.get_client(first)
    assert again is not clients[0]
    assert again.state is ConnectionState.CONNECTED
