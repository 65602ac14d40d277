"""Celery's settings through the core's reader: the old names and defaults, the new settings."""

from __future__ import annotations

import pytest
from celery import Celery

import zk_recipes_celery as zc
from zk_recipes import (
    ClientSettings,
    ConfigurationError,
    ExponentialBackoffRetry,
    RetryForever,
    RetryNTimes,
)


def test_defaults_are_unchanged() -> None:
    config = zc.read_config({"zk_recipes_hosts": "zk1"}, app_name="proj")
    assert config == zc.CeleryZkConfig(client=ClientSettings("zk1:2181"), beat_name="proj")
    assert (config.prefix, config.singleton_root, config.beat_path) == (
        "/celery",
        "/celery/singleton",
        "/celery/beat/proj",
    )
    assert config.client.retry_policy == ExponentialBackoffRetry(0.1, 5)
    assert zc.read_config({"zk_recipes_hosts": "zk1"}).beat_name == "default"


def test_client_options_fill_what_has_no_setting_of_its_own() -> None:
    conf = {
        "zk_recipes_hosts": "zk1",
        "zk_recipes_session_timeout": 4,
        "zk_recipes_client_options": {
            "session_timeout": 30,  # the setting of its own wins
            "retry_policy": RetryForever(1.0),
            "max_data_bytes": 4096,
        },
    }
    client = zc.read_config(conf).client
    assert (client.session_timeout, client.retry_policy, client.max_data_bytes) == (
        4.0,
        RetryForever(1.0),
        4096,
    )
    # ... and a setting of its own for a field wins there too.
    retry = {"policy": "RetryNTimes", "n": 2, "sleep": 0.5}
    client = zc.read_config({**conf, "zk_recipes_retry": retry}).client
    assert client.retry_policy == RetryNTimes(2, 0.5)


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        (
            {"zk_recipes_client_options": {"retry": 1}},
            r"^zk_recipes_client_options: 'retry' is not a ClientSettings field",
        ),
        ({"zk_recipes_client_options": [1]}, r"^zk_recipes_client_options: must be a dict"),
        (
            {"zk_recipes_client_options": {"read_only": "yes"}},
            r"^zk_recipes_client_options: read_only must be True or False",
        ),
        ({"zk_recipes_beat_name": "a/b"}, r"^zk_recipes_beat_name: must be a name without '/'"),
        ({"zk_recipes_beat_scheduler": "x"}, r"^zk_recipes_beat_scheduler: must name a scheduler"),
        ({"zk_recipes_singelton_eager": "lock"}, "did you mean 'zk_recipes_singleton_eager'"),
        ({"zk_recipes_sesion_timeout": 3}, "did you mean 'zk_recipes_session_timeout'"),
    ],
)
def test_bad_settings_name_the_celery_setting(conf: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        zc.read_config({"zk_recipes_hosts": "zk1", **conf})


def test_numeric_strings_from_the_environment_are_numbers() -> None:
    """A celeryconfig built from os.environ gives strings: they are read as numbers."""
    app = Celery("env", set_as_current=False)
    app.conf.update(
        zk_recipes_hosts="zk1:2181",
        zk_recipes_session_timeout="6",
        zk_recipes_connection_timeout="2.5",
        zk_recipes_max_data_bytes="4096",
    )
    client = zc.read_config(app.conf, app_name=app.main).client
    assert (client.session_timeout, client.connection_timeout, client.max_data_bytes) == (
        6.0,
        2.5,
        4096,
    )
    with pytest.raises(ConfigurationError, match=r"^zk_recipes_session_timeout: .*got 'six'"):
        zc.read_config({"zk_recipes_hosts": "zk1", "zk_recipes_session_timeout": "six"})


@pytest.mark.parametrize(
    ("value", "expected"),
    [(False, False), ("false", False), ("0", False), ("off", False), ("yes", True), (True, True)],
)
def test_check_on_start_reads_words_as_words(value: object, expected: bool) -> None:
    """``"false"`` from the environment is False: bool("false") would be True."""
    conf = {"zk_recipes_hosts": "zk1", "zk_recipes_check_on_start": value}
    assert zc.read_config(conf).check_on_start is expected


def test_check_on_start_refuses_what_is_not_a_yes_or_no() -> None:
    with pytest.raises(ConfigurationError, match=r"^zk_recipes_check_on_start: must be True or"):
        zc.read_config({"zk_recipes_hosts": "zk1", "zk_recipes_check_on_start": "maybe"})


def test_a_real_app_conf_with_a_django_namespace() -> None:
    app = Celery("dj", set_as_current=False)
    app.config_from_object(
        {
            "CELERY_ZK_RECIPES_HOSTS": "zk1:2181",
            "CELERY_ZK_RECIPES_RETRY": {"policy": "RetryForever", "interval": 2.0},
            "CELERY_ZK_RECIPES_BEAT_NAME": "nightly",
            "CELERY_BROKER_URL": "memory://",
        },
        namespace="CELERY",
    )
    config = zc.read_config(app.conf, app_name=app.main)
    assert config.client.retry_policy == RetryForever(2.0)
    assert config.beat_path == "/celery/beat/nightly"
    app.conf["CELERY_ZK_RECIPES_BEAT_NAEM"] = "x"
    with pytest.raises(ConfigurationError, match="did you mean 'CELERY_ZK_RECIPES_BEAT_NAME'"):
        zc.read_config(app.conf, app_name=app.main)
    app.close()
