"""gunicorn server hooks: announce each worker while it serves, close its sessions at its exit.

In ``gunicorn.conf.py``::

    from zk_recipes_django.gunicorn import post_worker_init, worker_exit  # noqa: F401

``post_worker_init`` registers the worker (``ZK_RECIPES[alias]["SERVICE"]``)
once its application is loaded; ``worker_exit`` deletes its instance and
closes its ZooKeeper sessions at once (gunicorn may end a worker without
running ``atexit``), so its locks are free and its instance gone the moment
it stops, not a session timeout later.
"""

from __future__ import annotations

from typing import Any


def post_worker_init(worker: Any) -> None:
    from zk_recipes_django._announcements import announce

    announce()


def worker_exit(server: Any, worker: Any) -> None:
    from zk_recipes_django._clients import close_all

    close_all()
