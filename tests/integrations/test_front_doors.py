"""Each integration checks its framework's version at import, naming both and the fix."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("integration", "pretend_old", "message"),
    [
        (
            "zk_recipes_django",
            "import django; django.VERSION = (4, 1, 0, 'final', 0)",
            "zk_recipes_django needs Django >= 4.2, found 4.1.0",
        ),
        (
            "zk_recipes_flask",
            "import importlib.metadata as m; real = m.version; "
            "m.version = lambda name: '2.2.5' if name == 'flask' else real(name)",
            "zk_recipes_flask needs Flask >= 2.3, found 2.2.5",
        ),
        (
            "zk_recipes_celery",
            "import celery; celery.VERSION = (5, 2, 7)",
            "zk_recipes_celery needs Celery >= 5.3, found 5.2.7",
        ),
    ],
)
def test_each_integration_checks_its_framework_at_import(
    integration: str, pretend_old: str, message: str
) -> None:
    framework = integration.removeprefix("zk_recipes_")
    pytest.importorskip(framework)
    code = f"{pretend_old}\ntry:\n    import {integration}\nexcept ImportError as e:\n    print(e)"
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert message in shown.stdout, shown.stdout + shown.stderr
