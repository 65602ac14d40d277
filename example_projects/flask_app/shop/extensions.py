"""The extension objects, made once and bound to each app in ``create_app``."""

from __future__ import annotations

# --8<-- [start:extension]
from zk_recipes_flask import ZkRecipes

zk = ZkRecipes()
# --8<-- [end:extension]
