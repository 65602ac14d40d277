from __future__ import annotations

from django.contrib import admin
from django.urls import path

from tests.integrations.django.site.testapp import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("locked/sync/busy/", views.sync_busy),
    path("locked/sync/wait/", views.sync_wait),
    path("locked/async/busy/", views.async_busy),
    path("locked/async/wait/", views.async_wait),
    path("locked/async/ping/", views.async_ping),
    path("locked/invoice/<path:pk>/", views.invoice),
    path("locked/custom/", views.custom_busy),
    path("locked/async/custom/", views.async_custom_busy),
    path("locked/report/<int:pk>/", views.ReportView.as_view()),
]
