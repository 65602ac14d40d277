from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

from zk_recipes import metrics

# --8<-- [start:plugin]
pytest_plugins = ["zk_recipes.testing.pytest_plugin"]
# --8<-- [end:plugin]
# Celery's fixtures only where Celery is installed: the core suite runs without it.
# (pytest takes plugins from the top-level conftest only, hence here, not in
# tests/integrations/celery/.)
if importlib.util.find_spec("celery") is not None:
    pytest_plugins.append("zk_recipes_celery.testing.pytest_plugin")


# The metrics fixtures: tests/test_metrics.py's, and each family's metric tests.
@pytest.fixture
def templates() -> Iterator[None]:
    before = metrics.path_templates()
    metrics.clear_path_templates()
    yield
    metrics.clear_path_templates()
    for template, name in before.items():
        metrics.path_template(template, name)


@pytest.fixture
def registry(templates: None) -> Iterator[Any]:
    """A registry of this test's own, recorded into while the test runs."""
    prometheus_client = pytest.importorskip("prometheus_client")
    previous = metrics.registry()
    own = prometheus_client.CollectorRegistry()
    metrics.enable(own)
    yield own
    if previous is None:
        metrics.disable()
    else:
        metrics.enable(previous)
