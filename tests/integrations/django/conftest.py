"""The Django tests: pytest-django with the test site in ``site/``, on real ZooKeeper.

``zk_settings`` points ``settings.ZK_RECIPES`` at this test's server and
namespace (through ``override_settings``, so the accessor's reset is tested
by every test); ``manage`` runs the site's manage.py as a real process with
the same ZooKeeper in its environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("django")
pytest.importorskip("pytest_django")

import django
from django.conf import settings as django_settings

SETTINGS_MODULE = "tests.integrations.django.site.settings"
# Configured here, not through DJANGO_SETTINGS_MODULE: an environment variable
# would reach the other tests' processes (Celery workers would load Django).
if not django_settings.configured:
    import importlib

    _module = importlib.import_module(SETTINGS_MODULE)
    django_settings.configure(**{k: getattr(_module, k) for k in dir(_module) if k.isupper()})
    django.setup()

import zk_recipes_django  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
MANAGE = Path(__file__).resolve().parent / "site" / "manage.py"
#: Session timeout of the tests' Django processes: short, for the expiry and kill tests.
SESSION_TIMEOUT = 3.0


@pytest.fixture
def zk_settings(settings: Any, zk_hosts: str, zk_namespace: str) -> Iterator[dict[str, Any]]:
    """``settings.ZK_RECIPES["default"]`` on this test's server and namespace."""
    entry = {
        "HOSTS": zk_hosts,
        "NAMESPACE": zk_namespace,
        "SESSION_TIMEOUT": SESSION_TIMEOUT,
        "CONNECTION_TIMEOUT": 5.0,
    }
    settings.ZK_RECIPES = {"default": entry}
    yield entry
    zk_recipes_django.close_all()


def manage_env(zk_hosts: str, zk_namespace: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        # The caller's PYTHONPATH too: scripts/test.sh puts Django 4.2 there for its second pass.
        PYTHONPATH=os.pathsep.join(
            [str(ROOT), str(ROOT / "integrations"), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        DJANGO_SETTINGS_MODULE=SETTINGS_MODULE,
        ZK_HOSTS=zk_hosts,
        ZK_NAMESPACE=zk_namespace,
        ZK_SESSION_TIMEOUT=str(SESSION_TIMEOUT),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


class Manage:
    """Runs ``manage.py`` of the test site as real processes on this test's ZooKeeper."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.started: list[subprocess.Popen[str]] = []

    def popen(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(MANAGE), *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **kwargs,
        )
        self.started.append(process)
        return process

    def run(self, args: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(MANAGE), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
            process.communicate()


@pytest.fixture
def manage(zk_hosts: str, zk_namespace: str) -> Iterator[Manage]:
    runner = Manage(manage_env(zk_hosts, zk_namespace))
    yield runner
    runner.stop_all()
