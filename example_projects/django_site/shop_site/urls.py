from __future__ import annotations

from django.contrib import admin
from django.urls import path
from invoices import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("invoices/<int:pk>/send/", views.send_invoice, name="send-invoice"),
]
