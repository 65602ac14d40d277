"""The system checks: each fires for its bad setting, with its id; the deploy check connects.

Static checks run in process against ``override_settings`` (pytest-django's
``settings`` fixture), which also proves the accessor forgets on
``setting_changed``; the deploy check runs ``manage.py check --deploy`` as a
real process against a real server and against a closed port.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core import checks
from django.core.management.base import BaseCommand

import zk_recipes_django
from zk_recipes import ConnectionState
from zk_recipes.testing import free_ports
from zk_recipes_django import _settings

from .conftest import Manage, manage_env

GOOD = {"HOSTS": "127.0.0.1:2181"}


def _ids(settings: Any, value: object) -> list[str]:
    if value is _MISSING:
        del settings.ZK_RECIPES
    else:
        settings.ZK_RECIPES = value
    found = checks.run_checks(tags=["zk_recipes"])
    return sorted(m.id for m in found if m.id and m.id.startswith("zk_recipes."))


_MISSING = object()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (_MISSING, ["zk_recipes.E001"]),
        ("zk1:2181", ["zk_recipes.E002"]),
        ({"default": "zk1:2181"}, ["zk_recipes.E002"]),
        ({"default": {"NAMESPACE": "shop"}}, ["zk_recipes.E003"]),
        ({"default": {**GOOD, "SESION_TIMEOUT": 5}}, ["zk_recipes.E004"]),
        ({"default": {**GOOD, "session_timeout": 5}}, ["zk_recipes.E004"]),
        ({"default": {**GOOD, "READ_ONLY": "sometimes"}}, ["zk_recipes.E005"]),
        ({"default": {**GOOD, "HOSTS": 2181}}, ["zk_recipes.E005"]),
        ({"default": {**GOOD, "SESSION_TIMEOUT": -1}}, ["zk_recipes.E006"]),
        ({"default": {**GOOD, "CONNECTION_TIMEOUT": "soon"}}, ["zk_recipes.E006"]),
        ({"default": {**GOOD, "SIMULATED_EXPIRY_FRACTION": 2}}, ["zk_recipes.E006"]),
        ({"default": {**GOOD, "RETRY": {"policy": "TryHarder"}}}, ["zk_recipes.E007"]),
        ({"default": {**GOOD, "RETRY": {"policy": "RetryNTimes", "n": "x"}}}, ["zk_recipes.E007"]),
        # The test site's views lock on "default" (E008), and there is no "default" (W001).
        ({"other": GOOD}, ["zk_recipes.E008", "zk_recipes.W001"]),
        ({"default": GOOD, "reports": {**GOOD, "NAMESPACE": "reports"}}, []),
        # Numbers as settings built from os.environ give them.
        ({"default": {**GOOD, "SESSION_TIMEOUT": "10", "MAX_DATA_BYTES": "4096"}}, []),
        # SERVICE (discovery): a setting of its own, its keys checked.
        ({"default": {**GOOD, "SERVICE": {"NAME": "shop", "PORT": 8000}}}, []),
        ({"default": {**GOOD, "SERVICE": {"NAME": "shop", "PROT": 8000}}}, ["zk_recipes.E005"]),
        # A flat dict is one error saying to put the alias around it.
        ({"HOSTS": "zk1:2181", "SESSION_TIMEOUT": 5}, ["zk_recipes.E002"]),
    ],
)
def test_each_static_check_fires_for_its_setting(
    settings: Any, value: object, expected: list[str]
) -> None:
    assert _ids(settings, value) == expected


def test_messages_name_the_key_and_say_the_fix(settings: Any) -> None:
    settings.ZK_RECIPES = {"default": {**GOOD, "SESION_TIMEOUT": 5}}
    (message,) = checks.run_checks(tags=["zk_recipes"])
    assert 'ZK_RECIPES["default"]["SESION_TIMEOUT"]' in message.msg
    assert "SESSION_TIMEOUT" in message.msg.split("did you mean", 1)[1]
    settings.ZK_RECIPES = {"default": {"NAMESPACE": "shop"}}
    (message,) = checks.run_checks(tags=["zk_recipes"])
    assert message.hint is not None
    assert '"HOSTS"' in message.hint


def test_a_flat_dict_gets_the_alias_around_it_not_an_alias_named_hosts(settings: Any) -> None:
    settings.ZK_RECIPES = {"HOSTS": "zk1:2181", "SESSION_TIMEOUT": 5}
    (message,) = checks.run_checks(tags=["zk_recipes"])
    assert message.id == "zk_recipes.E002"
    assert "holds settings itself (HOSTS, SESSION_TIMEOUT)" in message.msg
    assert message.hint is not None
    assert '{"default": {"HOSTS": ..., "SESSION_TIMEOUT": ...}}' in message.hint
    assert '{"HOSTS": {"HOSTS"' not in message.msg + message.hint
    # Used anyway (a command, a view), the settings error says the same.
    with pytest.raises(zk_recipes_django.SettingsError, match=r'\{"default": \{"HOSTS": '):
        zk_recipes_django.config()


def test_numeric_strings_are_read_and_computed_floats_rounded(settings: Any) -> None:
    settings.ZK_RECIPES = {"default": {**GOOD, "SESSION_TIMEOUT": "7.5", "MAX_DATA_BYTES": "4096"}}
    client = zk_recipes_django.config().client
    assert (client.session_timeout, client.max_data_bytes) == (7.5, 4096)
    settings.ZK_RECIPES = {"default": {**GOOD, "SIMULATED_EXPIRY_FRACTION": 0.7 * 1.5}}
    (message,) = checks.run_checks(tags=["zk_recipes"])
    assert message.id == "zk_recipes.E006"
    assert "got 1.05;" in message.msg
    assert "1.0499999" not in message.msg


def test_an_alias_used_by_a_command_but_not_configured_is_e008(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_settings, "_uses", {})

    class Command(zk_recipes_django.LockedCommandMixin, BaseCommand):  # type: ignore[misc]
        lock_alias = "payments"

    settings.ZK_RECIPES = {"default": GOOD}
    (message,) = checks.run_checks(tags=["zk_recipes"])
    assert message.id == "zk_recipes.E008"
    assert "'payments'" in message.msg
    settings.ZK_RECIPES = {"default": GOOD, "payments": GOOD}
    assert checks.run_checks(tags=["zk_recipes"]) == []


def test_override_settings_takes_effect_on_the_next_use(
    settings: Any, zk_hosts: str, zk_namespace: str
) -> None:
    settings.ZK_RECIPES = {"default": {"HOSTS": zk_hosts, "NAMESPACE": zk_namespace + "/a"}}
    first = zk_recipes_django.get_client()
    assert first.namespace == zk_namespace + "/a"
    settings.ZK_RECIPES = {"default": {"HOSTS": zk_hosts, "NAMESPACE": zk_namespace + "/b"}}
    # The change closed the client made from the old value; the next use reads the new one.
    assert first.state is ConnectionState.CLOSED
    second = zk_recipes_django.get_client()
    assert second.namespace == zk_namespace + "/b"
    assert zk_recipes_django.config().client.namespace == zk_namespace + "/b"
    zk_recipes_django.close_all()


def test_unknown_alias_and_missing_settings_say_how_to_fix_them(settings: Any) -> None:
    settings.ZK_RECIPES = {"default": GOOD}
    with pytest.raises(zk_recipes_django.SettingsError, match="no alias 'nope'"):
        zk_recipes_django.get_client("nope")
    del settings.ZK_RECIPES
    with pytest.raises(zk_recipes_django.SettingsError, match="add ZK_RECIPES = "):
        zk_recipes_django.config()


def test_check_deploy_connects_and_reports_the_negotiated_timeout(manage: Manage) -> None:
    run = manage.run(["check", "--deploy", "--tag", "zk_recipes"])
    assert run.returncode == 0, run.stderr
    assert "zk_recipes.I001" in run.stdout + run.stderr
    assert "3s negotiated" in run.stdout + run.stderr


def test_static_checks_never_connect_but_deploy_fails_on_an_unreachable_ensemble(
    zk_namespace: str, tmp_path: Path
) -> None:
    (port,) = free_ports(1)
    closed = Manage(manage_env(f"127.0.0.1:{port}", zk_namespace))
    run = closed.run(["check"])
    assert run.returncode == 0, run.stderr  # no network: CI without ZooKeeper stays green
    run = closed.run(["check", "--deploy", "--tag", "zk_recipes"], timeout=60)
    assert run.returncode == 1
    assert "zk_recipes.E010" in run.stderr
    assert f"127.0.0.1:{port}" in run.stderr
    assert "within 5s" in run.stderr  # the bound: min(5 s, CONNECTION_TIMEOUT)
