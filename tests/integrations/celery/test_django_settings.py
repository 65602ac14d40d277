"""One setting serves Django and Celery: the client settings from Django's ZK_RECIPES.

Each check configures Django in a process of its own (``python -c``): Django's
settings are configured once per process, and the pytest process may hold the
Django tests' site already, so a check here never depends on which tests ran
before it. One worker test runs a singleton task from a project whose only
ZooKeeper settings are Django's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from zk_recipes import ClientSettings, NoNodeError, Owner, ZkClient
from zk_recipes.testing import wait_until
from zk_recipes_celery.testing import CeleryProject

pytest.importorskip("django")

ROOT = Path(__file__).resolve().parents[3]

#: Run in a fresh interpreter: configures Django (or not) as ``SCENARIO`` says,
#: makes a Celery app the way a Django project does, and prints what it read.
SCRIPT = textwrap.dedent(
    """
    import json, logging, os, sys

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    scenario = json.loads(os.environ["SCENARIO"])
    if scenario["import_django"]:
        import django.conf
    if scenario["django"] is not None:
        from django.conf import settings
        settings.configure(**scenario["django"])

    from celery import Celery
    import zk_recipes
    import zk_recipes_celery

    app = Celery("proj", set_as_current=False)
    app.config_from_object(scenario["source"], namespace="CELERY")
    out = {}
    try:
        config = zk_recipes_celery.read_config(app.conf, app_name=app.main)
    except zk_recipes.ConfigurationError as exc:
        out["error"] = str(exc)
    else:
        out.update(
            hosts=config.client.hosts,
            namespace=config.client.namespace,
            session_timeout=config.client.session_timeout,
            identifier=config.identifier,
            prefix=config.prefix,
            singleton_root=config.singleton_root,
        )
        if scenario["create"]:
            client = zk_recipes_celery.get_client(app, timeout=10)
            client.create(scenario["create"])
            zk_recipes_celery.close_clients()
    # kombu imports django.utils where Django is installed; django.conf is the settings.
    out["django_conf_imported"] = "django.conf" in sys.modules
    conf_module = sys.modules.get("django.conf")
    out["django_configured"] = bool(conf_module and conf_module.settings.configured)
    print(json.dumps(out))
    """
)

DJANGO_SITE = {
    "default": {
        "HOSTS": "zk-django:2181",
        "NAMESPACE": "shop",
        "SESSION_TIMEOUT": 4.5,
        "IDENTIFIER": "web-1",
        "PREFIX": "/django-nodes",  # Django's own nodes: Celery keeps /celery
    },
    "other": {"HOSTS": "zk-other:2181", "NAMESPACE": "other"},
}


def _run(
    django: dict[str, Any] | None,
    *,
    source: object = "django.conf:settings",
    import_django: bool = False,
    create: str | None = None,
) -> tuple[dict[str, Any], str]:
    """Run ``SCRIPT``; return what it printed and its log."""
    scenario = {
        "django": django,
        "source": source,
        "import_django": import_django,
        "create": create,
    }
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    inherited = env.get("PYTHONPATH")
    paths = [str(ROOT), str(ROOT / "integrations"), *([inherited] if inherited else [])]
    env.update(PYTHONPATH=os.pathsep.join(paths), SCENARIO=json.dumps(scenario))
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=45,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1]), result.stderr


def _django(zk_recipes: object, **celery: object) -> dict[str, Any]:
    """Django settings holding ``ZK_RECIPES`` and ``CELERY_*`` keys."""
    settings: dict[str, Any] = {"SECRET_KEY": "x", "CELERY_BROKER_URL": "memory://"}
    if zk_recipes is not None:
        settings["ZK_RECIPES"] = zk_recipes
    settings.update({f"CELERY_{key}": value for key, value in celery.items()})
    return settings


WINS = "they win, Django's ZK_RECIPES is not read for Celery"


def test_celery_connects_with_djangos_settings(
    zk_hosts: str, zk_namespace: str, zk_client: ZkClient
) -> None:
    entry = {"HOSTS": zk_hosts, "NAMESPACE": zk_namespace, "SESSION_TIMEOUT": 4.5}
    out, log = _run(_django({"default": entry}), create="/made-by-celery")
    expected = ClientSettings(zk_hosts, zk_namespace)
    assert (out["hosts"], out["namespace"], out["session_timeout"]) == (
        expected.hosts,
        expected.namespace,
        4.5,
    )
    assert (out["prefix"], out["singleton_root"]) == ("/celery", "/celery/singleton")
    assert zk_client.exists("/made-by-celery") is not None  # in Django's namespace
    assert WINS not in log


@pytest.mark.parametrize(
    ("celery", "expected"),
    [
        pytest.param({}, ("zk-django:2181", "/shop", 4.5, "web-1", "/celery"), id="django"),
        pytest.param(
            {"ZK_RECIPES_DJANGO_ALIAS": "other"},
            ("zk-other:2181", "/other", 10.0, None, "/celery"),
            id="alias",
        ),
        pytest.param(
            {"ZK_RECIPES_IDENTIFIER": "worker-1", "ZK_RECIPES_PREFIX": "/jobs"},
            ("zk-django:2181", "/shop", 4.5, "worker-1", "/jobs"),
            id="celery-options",
        ),
        pytest.param(
            {"ZK_RECIPES_HOSTS": "zk-celery"},
            ("zk-celery:2181", "", 10.0, None, "/celery"),
            id="celery-hosts",
        ),
    ],
)
def test_which_settings_celery_takes(
    celery: dict[str, object], expected: tuple[object, ...]
) -> None:
    out, log = _run(_django(DJANGO_SITE, **celery))
    assert (
        out["hosts"],
        out["namespace"],
        out["session_timeout"],
        out["identifier"],
        out["prefix"],
    ) == expected
    # Celery's own client settings win entirely, and it says so once.
    assert log.count(WINS) == (1 if "ZK_RECIPES_HOSTS" in celery else 0)


def test_celerys_own_client_settings_need_their_own_hosts() -> None:
    # client_options is a client setting too: Django's HOSTS is not taken to go with it.
    out, log = _run(_django(DJANGO_SITE, ZK_RECIPES_CLIENT_OPTIONS={"read_only": True}))
    assert out["error"].startswith("zk_recipes_hosts is not set")
    assert "(zk_recipes_client_options): " + WINS in log
    out, log = _run(_django(DJANGO_SITE, ZK_RECIPES_SESSION_TIMEOUT=3))
    assert out["error"].startswith("zk_recipes_hosts is not set")
    assert "(zk_recipes_session_timeout): " + WINS in log


@pytest.mark.parametrize(
    ("zk_recipes", "celery", "message"),
    [
        (
            {"default": {"HOSTS": "zk1", "SESSION_TIMEOUT": "ten"}},
            {},
            'ZK_RECIPES["default"]["SESSION_TIMEOUT"]: must be',
        ),
        ({"default": {"NAMESPACE": "shop"}}, {}, 'ZK_RECIPES["default"]["HOSTS"] is not set'),
        (
            {"other": {"HOSTS": "zk1", "SESION_TIMEOUT": 3}},
            {"ZK_RECIPES_DJANGO_ALIAS": "other"},
            """ZK_RECIPES["other"]["SESION_TIMEOUT"] is not a setting (did you mean""",
        ),
        (
            {"web": {"HOSTS": "zk1"}},
            {},
            "zk_recipes_django_alias (CELERY_ZK_RECIPES_DJANGO_ALIAS in Django's settings) is "
            "'default', but Django's ZK_RECIPES has no alias 'default'; known aliases: 'web'.",
        ),
    ],
    ids=["bad-value", "no-hosts", "unknown-key", "unknown-alias"],
)
def test_a_bad_django_setting_is_named_as_django_writes_it(
    zk_recipes: dict[str, Any], celery: dict[str, object], message: str
) -> None:
    out, _ = _run(_django(zk_recipes, **celery))
    assert out["error"].startswith(message), out["error"]
    if "alias" not in message:
        assert "Celery takes its client settings from Django's ZK_RECIPES" in out["error"]


@pytest.mark.parametrize(
    ("django", "import_django"),
    [(None, False), (None, True), (_django(None), True)],
    ids=["not-imported", "imported-not-configured", "no-zk-recipes"],
)
def test_without_djangos_zk_recipes_nothing_changes(
    django: dict[str, Any] | None, import_django: bool
) -> None:
    own = {"CELERY_ZK_RECIPES_HOSTS": "zk-celery", "CELERY_BROKER_URL": "memory://"}
    if django is not None:
        source: object = "django.conf:settings"
        django = {**django, **own}
    else:
        source = own
    out, log = _run(django, source=source, import_django=import_django)
    assert (out["hosts"], out["namespace"], out["prefix"]) == ("zk-celery:2181", "", "/celery")
    assert out["django_conf_imported"] is (import_django or django is not None)
    assert out["django_configured"] is (django is not None)
    assert WINS not in log
    # ... and without hosts of its own, Celery still says what to add.
    if django is None:
        out, _ = _run(None, source={"CELERY_BROKER_URL": "memory://"}, import_django=import_django)
        assert out["error"].startswith("zk_recipes_hosts is not set")
        assert out["django_conf_imported"] is import_django


# -- a real worker ----------------------------------------------------------------------------

DJANGO_SETTINGS = textwrap.dedent(
    """
    import os

    SECRET_KEY = "celery-from-django"
    CELERY_BROKER_URL = os.environ["REDIS_URL"]
    CELERY_RESULT_BACKEND = os.environ["REDIS_URL"]
    CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
    ZK_RECIPES = {
        "default": {
            "HOSTS": os.environ["ZK_HOSTS"],
            "NAMESPACE": os.environ["ZK_NAMESPACE"],
            "SESSION_TIMEOUT": float(os.environ["ZK_SESSION_TIMEOUT"]),
        }
    }
    """
)

APP = textwrap.dedent(
    """
    import os
    import time

    from celery import Celery

    from zk_recipes_celery import singleton_task
    from zk_recipes_celery.testing import record

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djsettings")

    app = Celery("proj")
    app.config_from_object("django.conf:settings", namespace="CELERY")


    @app.task(name="proj.hold", bind=True)
    @singleton_task
    def hold(self):
        record(event="start", task_id=self.request.id)
        deadline = time.monotonic() + 20
        while not os.path.exists(os.environ["RELEASE_FILE"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        return "done"
    """
)


def _lock_nodes(client: ZkClient, root: str) -> list[str]:
    try:
        return [f"{root}/{child}" for child in client.get_children(root)]
    except NoNodeError:  # a CONTAINER the server reaped once empty
        return []


@pytest.mark.slow
def test_a_worker_with_only_djangos_settings_locks_under_djangos_namespace(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    release = project.base_dir / "release"
    project.env["RELEASE_FILE"] = str(release)
    (project.app_dir / "djsettings.py").write_text(DJANGO_SETTINGS)
    module = project.write_app(APP)
    worker = project.start_worker(module, concurrency=1)

    result = project.client_app().send_task("proj.hold")
    project.wait_records(lambda records: [r["event"] for r in records] == ["start"])

    # zk_client is on the test's namespace, the one Django's ZK_RECIPES names.
    nodes = _lock_nodes(zk_client, "/celery/singleton/proj.hold/task")
    assert len(nodes) == 1, nodes
    assert Owner.from_bytes(zk_client.get(nodes[0])[0]).id == result.id
    release.touch()
    assert result.get(timeout=20) == "done"
    wait_until(
        lambda: _lock_nodes(zk_client, "/celery/singleton/proj.hold/task") == [],
        "the lock node deleted",
    )
    assert WINS not in worker.log()
