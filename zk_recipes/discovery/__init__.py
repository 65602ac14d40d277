"""Service discovery in curator-x-discovery's layout and JSON (Curator 5.4), byte for byte.

``ServiceDiscovery`` registers this process's instances and queries
everyone's; ``ServiceCache`` keeps one service's instances; a
``ServiceProvider`` picks one. Everything is also importable from
``zk_recipes``. docs/recipes/discovery.md has the layout, the JSON, the
payload rules for Java readers and where we differ from Curator on purpose.
"""

from __future__ import annotations

from zk_recipes.discovery._cache import (
    ServiceCache as ServiceCache,
    ServiceCacheEvent as ServiceCacheEvent,
)
from zk_recipes.discovery._discovery import ServiceDiscovery as ServiceDiscovery
from zk_recipes.discovery._instance import (
    ServiceInstance as ServiceInstance,
    ServiceType as ServiceType,
)
from zk_recipes.discovery._payload import (
    JavaValue as JavaValue,
    spring_cloud_payload as spring_cloud_payload,
)
from zk_recipes.discovery._provider import (
    DownInstancePolicy as DownInstancePolicy,
    ProviderStrategy as ProviderStrategy,
    RandomStrategy as RandomStrategy,
    RoundRobinStrategy as RoundRobinStrategy,
    ServiceProvider as ServiceProvider,
    StickyStrategy as StickyStrategy,
)
from zk_recipes.discovery._uri_spec import UriPart as UriPart, UriSpec as UriSpec

__all__ = [
    "DownInstancePolicy",
    "JavaValue",
    "ProviderStrategy",
    "RandomStrategy",
    "RoundRobinStrategy",
    "ServiceCache",
    "ServiceCacheEvent",
    "ServiceDiscovery",
    "ServiceInstance",
    "ServiceProvider",
    "ServiceType",
    "StickyStrategy",
    "UriPart",
    "UriSpec",
    "spring_cloud_payload",
]
