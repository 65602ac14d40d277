"""The shop's Django project; its Celery app is loaded with it, as Celery's Django guide does."""

from __future__ import annotations

from shop_site.celery import app as celery_app

__all__ = ["celery_app"]
