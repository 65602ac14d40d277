"""gunicorn server hooks: announce each worker while it serves, close its sessions at its exit.

In ``gunicorn.conf.py``::

    from zk_recipes_flask.gunicorn import post_worker_init, worker_exit  # noqa: F401

``post_worker_init`` registers the worker as an instance of every app's
``ZK_RECIPES_SERVICE`` once the app is loaded; ``worker_exit`` deletes the
instances and closes the sessions at once (gunicorn may end a worker without
running ``atexit``).
"""

from __future__ import annotations

from typing import Any


def post_worker_init(worker: Any) -> None:
    from zk_recipes_flask import announce_all

    announce_all()


def worker_exit(server: Any, worker: Any) -> None:
    from zk_recipes_flask import close_all

    close_all()
