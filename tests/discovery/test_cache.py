"""ServiceCache: instances in id order, an event per change, unreadable nodes skipped."""

from __future__ import annotations

import pytest

from zk_recipes import (
    CacheEventType,
    ServiceCacheEvent,
    ServiceDiscovery,
    ServiceInstance,
)
from zk_recipes.testing import Recorder
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_the_cache_follows_registrations_in_id_order(
    zk_client_factory: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    writer = ServiceDiscovery(zk_client_factory()).start()
    reader = ServiceDiscovery(zk_client_factory()).start()
    events = Recorder[ServiceCacheEvent]()
    cache = reader.service_cache("svc")
    cache.listen(events)
    with cache.start(timeout=10):  # the directory does not exist yet: waited for, not made
        assert cache.instances() == []
        b = writer.register(ServiceInstance(name="svc", id="b", address=None))
        a = writer.register(ServiceInstance(name="svc", id="a", address=None))
        events.wait_for(lambda e: e.type is CacheEventType.CREATED, count=2)
        assert cache.instances() == [a, b]
        moved = writer.update(b.replace(port=1))
        changed = events.wait_for(lambda e: e.type is CacheEventType.CHANGED)
        assert (changed.old, changed.instance) == (b, moved)
        writer.client.create("/services/svc/junk", b"\xff")
        writer.unregister(a)
        gone = events.wait_for(lambda e: e.type is CacheEventType.DELETED)
        assert gone.old == a
        assert cache.instances() == [moved]
    assert "skipping an instance of svc" in caplog.text
    writer.close()
    reader.close()
