"""The shop's Celery app: configured from Django's settings, ZooKeeper included.

``config_from_object("django.conf:settings", namespace="CELERY")`` reads the
``CELERY_*`` settings; zk-recipes takes the ZooKeeper client settings from
``ZK_RECIPES["default"]`` because no ``CELERY_ZK_RECIPES_HOSTS`` is given.
Celery's own nodes stay under its prefix, ``/celery``.
"""
# Celery is untyped: its decorators return Any.
# mypy: disallow-untyped-decorators=False

from __future__ import annotations

# --8<-- [start:app]
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_site.settings")

app = Celery("shop_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# --8<-- [end:app]
