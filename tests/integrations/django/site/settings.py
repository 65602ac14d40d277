"""The test site's settings: ZooKeeper from the environment the tests set.

In-process tests override ``ZK_RECIPES`` per test (pytest-django's
``settings`` fixture); the commands run as real processes read ``ZK_HOSTS``,
``ZK_NAMESPACE``, ``ZK_SESSION_TIMEOUT`` and ``ZK_CONNECTION_TIMEOUT``.
"""

from __future__ import annotations

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "zk-recipes-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
ROOT_URLCONF = "tests.integrations.django.site.urls"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "zk_recipes_django",
    "tests.integrations.django.site.testapp",
]
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
        "DIRS": [],
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
        "NAME": os.environ.get("DJANGO_DB", str(BASE_DIR / "test.sqlite3")),
    }
}
STATIC_URL = "/static/"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
ZK_RECIPES = {
    "default": {
        "HOSTS": os.environ.get("ZK_HOSTS", "127.0.0.1:2181"),
        "NAMESPACE": os.environ.get("ZK_NAMESPACE", ""),
        "SESSION_TIMEOUT": float(os.environ.get("ZK_SESSION_TIMEOUT", "3")),
        "CONNECTION_TIMEOUT": float(os.environ.get("ZK_CONNECTION_TIMEOUT", "5")),
    }
}
if os.environ.get("ZK_SERVICE"):  # the announcement tests: JSON, as the env spelling takes it
    import json

    ZK_RECIPES["default"]["SERVICE"] = json.loads(os.environ["ZK_SERVICE"])
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"zk_recipes": {"handlers": ["stderr"], "level": "WARNING"}},
}
