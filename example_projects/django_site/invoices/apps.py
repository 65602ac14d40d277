from __future__ import annotations

from django.apps import AppConfig


class InvoicesConfig(AppConfig):  # type: ignore[misc]
    name = "invoices"
