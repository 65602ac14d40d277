"""A small shop on sqlite: invoices sent under a ZooKeeper lock, Celery on the same settings.

``ZK_RECIPES`` is the one ZooKeeper setting: Django's commands, views and
admin page use it, and so does the Celery app (``shop_site/celery.py``),
which reads the client settings from it when ``CELERY_ZK_RECIPES_*`` are
not given.
"""

# The docs include sections of this file, each with the imports it uses (E402).
# ruff: noqa: E402

from __future__ import annotations

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "shop_site.urls"
WSGI_APPLICATION = "shop_site.wsgi.application"
# --8<-- [start:installed_apps]
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "zk_recipes_django",
    "invoices",
]
# --8<-- [end:installed_apps]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_DB", str(BASE_DIR / "db.sqlite3")),
        # Several processes migrate and write at once in the demo: wait for sqlite's lock.
        "OPTIONS": {"timeout": 20},
    }
}
STATIC_URL = "/static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# One alias per ensemble, like DATABASES; every key is in docs/settings.md.
# --8<-- [start:zk_recipes]
import os

ZK_RECIPES = {
    "default": {
        "HOSTS": os.environ.get("ZK_HOSTS", "127.0.0.1:2181"),
        "NAMESPACE": "shop",
        # How long a crashed process keeps its locks: short for the demo.
        "SESSION_TIMEOUT": 4.0,
    },
}
# --8<-- [end:zk_recipes]

# --8<-- [start:celery]
import os

# Celery reads these through config_from_object(..., namespace="CELERY"); no
# CELERY_ZK_RECIPES_HOSTS: the client settings come from ZK_RECIPES["default"].
CELERY_BROKER_URL = os.environ.get("REDIS_URL", "memory://")
CELERY_RESULT_BACKEND = os.environ.get("REDIS_URL")  # results, when there is a broker
CELERY_TASK_ALWAYS_EAGER = os.environ.get("REDIS_URL") is None
# CELERY_ZK_RECIPES_DJANGO_ALIAS = "jobs"  # another alias of ZK_RECIPES for Celery
# --8<-- [end:celery]
# The report once a day (SHOP_REPORT_EVERY seconds: the demo makes it every second).
# Run `celery -A shop_site beat` on two hosts: the task is @leader_only, one sends it.
CELERY_BEAT_SCHEDULE = {
    "nightly-report": {
        "task": "invoices.tasks.nightly_report",
        "schedule": float(os.environ.get("SHOP_REPORT_EVERY", "86400")),
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"zk_recipes": {"handlers": ["stderr"], "level": "WARNING"}},
}
