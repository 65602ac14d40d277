from __future__ import annotations

pytest_plugins = ["zk_recipes.testing.pytest_plugin"]
