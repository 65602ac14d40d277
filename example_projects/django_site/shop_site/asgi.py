"""ASGI entry point: the lifespan wrapper closes the ZooKeeper sessions at shutdown."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

from zk_recipes_django.asgi import with_lifespan

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_site.settings")
application = with_lifespan(get_asgi_application())
