"""``Status``: the admin's "ZooKeeper" entry, a model with no table.

The admin lists models, so the ZooKeeper page hangs on one: unmanaged (no
table, never queried) and without default permissions (nothing to grant:
the page is for active staff, ``admin.StatusAdmin``). Its migration ships
with the app (``migrations/0001_initial.py``) so ``makemigrations`` in a
project never makes one.
"""

from __future__ import annotations

from django.db import models


class Status(models.Model):  # type: ignore[misc]
    """The ZooKeeper page of the admin; no rows, no table."""

    class Meta:
        managed = False
        default_permissions = ()
        verbose_name = "status"
        verbose_name_plural = "status"
