from __future__ import annotations

from django.apps import AppConfig


class TestAppConfig(AppConfig):  # type: ignore[misc]
    name = "tests.integrations.django.site.testapp"
    label = "testapp"
