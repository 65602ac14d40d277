"""A small Flask shop: charging an order under a ZooKeeper lock, the status blueprint, a CLI task.

``create_app()`` is an app factory, as Flask's tutorial writes them: the
extension object lives in ``shop.extensions`` and is bound to each app by
``init_app``. Configuration comes from ``ZK_RECIPES_*`` keys, here from the
environment (``app.config.from_prefixed_env``-style, by hand to keep it plain).

The payment provider and the export are stood in for by ``hold_until_told()``:
under the demo they last until the demo has seen the others refused
(``shop/demo_hold.py``); anywhere else they take no time.
"""

from __future__ import annotations

# --8<-- [start:app]
import os
from typing import Any

import click
from flask import Flask, g, jsonify

from shop.demo_hold import hold_until_told
from shop.extensions import zk


def create_app(config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        ZK_RECIPES_HOSTS=os.environ.get("ZK_HOSTS", "127.0.0.1:2181"),
        ZK_RECIPES_NAMESPACE="shop",
        # How long a crashed process keeps its locks: short for the demo.
        ZK_RECIPES_SESSION_TIMEOUT=4.0,
    )
    app.config.update(config or {})
    zk.init_app(app)
    # /zk/health for the load balancer's readiness probe, /zk/ for people.
    app.register_blueprint(zk.status_blueprint(), url_prefix="/zk")

    @app.post("/orders/<int:order_id>/charge")
    @zk.locked("order-{order_id}", timeout=0)  # a second click while charging: 423 at once
    def charge(order_id: int) -> Any:
        token = g.zk_lock.fencing_token
        hold_until_told()  # talking to the payment provider, passing it the token
        return jsonify(order=order_id, charged=True, fencing_token=token)

    @app.cli.command("export-orders")
    def export_orders() -> None:
        """Export yesterday's orders (run it under `flask zk lock export -- ...`)."""
        hold_until_told()  # writing the export
        click.echo(f"exported the orders (pid {os.getpid()})")

    return app


# --8<-- [end:app]
