"""The extension objects, made once and bound to each app in ``create_app``."""

from __future__ import annotations

from zk_recipes_flask import ZkRecipes

zk = ZkRecipes()
