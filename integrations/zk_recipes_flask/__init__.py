"""zk-recipes for Flask: ``ZkRecipes(app)``, ``flask zk ...``, locked views, a status blueprint.

::

    app.config["ZK_RECIPES_HOSTS"] = "zk1:2181,zk2:2181,zk3:2181"
    zk = ZkRecipes(app)          # or zk = ZkRecipes(); zk.init_app(app) in a factory

    @zk.locked("invoice-{id}")   # one request per invoice at a time; 423 when busy
    def send_invoice(id): ...

    app.register_blueprint(zk.status_blueprint(), url_prefix="/zk")

One ZooKeeper session per (app, process), made on first use, new after a
fork, closed at exit (``_extension``); locks on views and code
(``_locking``); the status blueprint (``_status``). See
docs/integrations/flask.md.
"""

from __future__ import annotations

import importlib.metadata

try:
    import flask  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "zk_recipes_flask needs Flask: install it with pip install 'zk-recipes[flask]'"
    ) from exc
else:  # the supported versions: the extra's pins (pyproject.toml)
    from zk_recipes.frameworks import require_version

    require_version(
        "zk_recipes_flask", "Flask", importlib.metadata.version("flask"), (2, 3), "flask"
    )

from zk_recipes_flask._extension import ZkRecipes, announce_all, close_all
from zk_recipes_flask._locking import LockBusy, LockUnavailable, current_lock

__all__ = ["LockBusy", "LockUnavailable", "ZkRecipes", "announce_all", "close_all", "current_lock"]
