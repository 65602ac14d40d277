"""The settings and set-up examples of docs/integrations/django.md, as the page shows them.

tests/integrations/django/test_django_page.py checks each with Django's
system checks and uses them on real ZooKeeper (the hosts swapped for the
test's own).
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin import AdminSite


def two_aliases() -> dict[str, Any]:
    # --8<-- [start:aliases]
    ZK_RECIPES = {
        "default": {
            "HOSTS": "zk1:2181,zk2:2181,zk3:2181",
            "NAMESPACE": "shop",  # every node under /shop
            "SESSION_TIMEOUT": 10.0,  # how long a crashed process keeps its locks
            "PREFIX": "/zk-recipes",  # where zklock and @zk_lock put their nodes
        },
        "payments": {"HOSTS": "zk-pay1:2181,zk-pay2:2181", "AUTH": ["digest:payments:secret"]},
    }
    # --8<-- [end:aliases]
    return ZK_RECIPES


def service() -> dict[str, Any]:
    # --8<-- [start:service]
    ZK_RECIPES = {
        "default": {
            "HOSTS": "zk1:2181,zk2:2181,zk3:2181",
            "SERVICE": {"NAME": "shop", "PORT": 8000, "URI_SPEC": "{scheme}://{address}:{port}"},
        }
    }
    # --8<-- [end:service]
    return ZK_RECIPES


my_site = AdminSite(name="operations")  # an admin site of your own

# --8<-- [start:admin_site]
# given: my_site (your own AdminSite)
from zk_recipes_django.admin import StatusAdmin
from zk_recipes_django.models import Status

my_site.register(Status, StatusAdmin)
# --8<-- [end:admin_site]

# --8<-- [start:asgi]
# asgi.py
from django.core.asgi import get_asgi_application

from zk_recipes_django.asgi import with_lifespan

application = with_lifespan(get_asgi_application())
# --8<-- [end:asgi]
