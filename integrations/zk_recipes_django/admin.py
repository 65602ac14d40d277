"""The admin's read-only ZooKeeper page: Home > ZooKeeper > Status.

``StatusAdmin`` turns the changelist of the table-less ``models.Status``
into the page (``_status`` reads, the template renders), so the page lives
in the admin index and behind the admin's login. Active staff see it, with
no permission to grant; nobody may add, change or delete (those views answer
403, before any database read). A project with its own ``AdminSite``
registers it there: ``site.register(Status, StatusAdmin)``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from zk_recipes import ConfigurationError
from zk_recipes_django import _status
from zk_recipes_django.models import Status

TEMPLATE = "zk_recipes_django/admin/status.html"


def _is_staff(request: HttpRequest) -> bool:
    user = request.user
    return bool(user.is_active and user.is_staff)


class StatusAdmin(admin.ModelAdmin):  # type: ignore[misc]
    """The ZooKeeper page: each alias's connection and who holds what, read on each load."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            aliases, error = _status.read_all(), None
        except ConfigurationError as exc:
            aliases, error = [], str(exc)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "ZooKeeper",
            "subtitle": None,
            "aliases": aliases,
            "settings_error": error,
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, TEMPLATE, context)

    # The object views would read the table that does not exist: refuse them first.
    def add_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        raise PermissionDenied

    def change_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        raise PermissionDenied

    def delete_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        raise PermissionDenied

    def history_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        raise PermissionDenied


admin.site.register(Status, StatusAdmin)
