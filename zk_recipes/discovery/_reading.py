"""Reading instance nodes tolerantly: a node that does not parse is skipped, logged, counted."""

from __future__ import annotations

import logging

from zk_recipes import _metrics
from zk_recipes._errors import UnreadableInstanceError
from zk_recipes.discovery._instance import ServiceInstance

log = logging.getLogger("zk_recipes.discovery")


def read_instance(service: str, path: str, data: bytes) -> ServiceInstance | None:
    """The instance in a node, or None (logged and counted) when it does not parse.

    One bad node never fails a whole query: Java's ``queryForInstances``
    throws for the whole service on one, and its ServiceCache drops it silently.
    """
    try:
        return ServiceInstance.from_json(data, where=path)
    except UnreadableInstanceError as exc:
        log.warning("skipping an instance of %s: %s", service, exc)
        _metrics.count("zk_recipes_service_instances_unreadable_total", service=service)
        return None
