from __future__ import annotations

import importlib.util

pytest_plugins = ["zk_recipes.testing.pytest_plugin"]
# Celery's fixtures only where Celery is installed: the core suite runs without it.
# (pytest takes plugins from the top-level conftest only, hence here, not in
# tests/integrations/celery/.)
if importlib.util.find_spec("celery") is not None:
    pytest_plugins.append("zk_recipes_celery.testing.pytest_plugin")
