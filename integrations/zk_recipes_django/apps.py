"""The app: ``INSTALLED_APPS += ["zk_recipes_django"]``.

``ready()`` does no ZooKeeper I/O: it runs in every ``manage.py`` command, in
runserver's reloader parent and in a gunicorn master before fork. It only
registers the system checks and the ``setting_changed`` receiver; clients are
made on first use, in the process that uses them (``_clients``).
"""

from __future__ import annotations

from django.apps import AppConfig
from django.core import checks
from django.core.signals import setting_changed


class ZkRecipesConfig(AppConfig):  # type: ignore[misc]
    name = "zk_recipes_django"
    label = "zk_recipes"
    verbose_name = "ZooKeeper"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from zk_recipes_django import _clients, _settings  # noqa: F401 - connects the reset
        from zk_recipes_django.checks import check_connectivity, check_settings

        checks.register(check_settings, "zk_recipes")
        checks.register(check_connectivity, "zk_recipes", deploy=True)
        setting_changed.connect(_settings.forget, dispatch_uid="zk_recipes_django.forget")
