"""A small app for ``flask --app tests.integrations.flask.appsite:create_app zk ...`` in a child.

Its ZooKeeper settings come from ``SHOP_ZK_*`` environment variables into
``app.config``, as an app's own configuration code would put them there: the
tests keep ``ZK_RECIPES_*`` out of the child's environment, so what
``flask zk`` uses can only be the app's config. Served by gunicorn in
test_gunicorn.py: a locked view (``/charge/<id>``) and the status blueprint.
"""

from __future__ import annotations

import os

from flask import Flask

from zk_recipes_flask import ZkRecipes

zk = ZkRecipes()


@zk.locked("charge-{id}")
def charge(id: int) -> str:
    return f"charged {id}\n"


def create_app() -> Flask:
    app = Flask(__name__)
    app.config.update(
        ZK_RECIPES_HOSTS=os.environ["SHOP_ZK_HOSTS"],
        ZK_RECIPES_NAMESPACE=os.environ["SHOP_ZK_NAMESPACE"],
        ZK_RECIPES_SESSION_TIMEOUT=float(os.environ.get("SHOP_ZK_SESSION_TIMEOUT", "3")),
        ZK_RECIPES_CONNECTION_TIMEOUT=float(os.environ.get("SHOP_ZK_CONNECTION_TIMEOUT", "10")),
    )
    if os.environ.get("SHOP_ZK_SERVICE"):  # the announcement tests
        app.config["ZK_RECIPES_SERVICE"] = os.environ["SHOP_ZK_SERVICE"]
    zk.init_app(app)
    app.add_url_rule("/charge/<int:id>", view_func=charge)
    app.register_blueprint(zk.status_blueprint(), url_prefix="/zk")
    return app
