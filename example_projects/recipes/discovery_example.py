"""Service discovery: register instances, pick one, watch them come and go, as Curator peers see it.

Run it from a clone: ``python example_projects/recipes/discovery_example.py``.
It starts a throwaway ZooKeeper (the ``[testing]`` extra and Java are
needed), so it needs no server of yours.
"""

from __future__ import annotations

import queue

from zk_recipes import (
    CacheEventType,
    ServiceCacheEvent,
    ServiceDiscovery,
    ServiceInstance,
    UriSpec,
    ZkClient,
    spring_cloud_payload,
)
from zk_recipes.testing import ZooKeeperServer


def main() -> None:
    with ZooKeeperServer() as server:
        # Two "hosts" of the orders service, each with its own client (session).
        hosts = [ZkClient(server.connect_string).start() for _ in range(2)]
        caller = ZkClient(server.connect_string).start()
        discoveries = [ServiceDiscovery(client).start() for client in hosts]
        for number, discovery in enumerate(discoveries, start=1):
            discovery.register(
                ServiceInstance(
                    name="orders",
                    id=f"orders-{number}",
                    address="127.0.0.1",
                    port=8000 + number,
                    uri_spec=UriSpec("{scheme}://{address}:{port}/api"),
                    # What a Spring Cloud Zookeeper service would read, too.
                    payload=spring_cloud_payload("orders", metadata={"zone": f"z{number}"}),
                )
            )
        node, _ = caller.get("/services/orders/orders-1")
        print("node bytes (Curator's JSON):", node.decode()[:72], "...")

        reader = ServiceDiscovery(caller)
        print("services:", reader.query_for_names())
        print("instances:", [i.id for i in reader.query_for_instances("orders")])

        events: queue.SimpleQueue[ServiceCacheEvent] = queue.SimpleQueue()
        with reader.service_provider("orders").start(timeout=10) as provider:
            provider.cache.listen(events.put)
            picks = [provider.get_instance() for _ in range(3)]
            print("round robin:", [p.build_uri() for p in picks if p is not None])

            # One host shuts down: its instance is deleted at once, and the cache hears it.
            discoveries[1].close()
            while (event := events.get(timeout=10)).type is not CacheEventType.DELETED:
                pass
            print("told:", event.type.value, event.old.id if event.old else None)
            left = provider.get_instance()
            print("now picks:", left.id if left else None)

        discoveries[0].close()
        for client in (*hosts, caller):
            client.close()


if __name__ == "__main__":
    main()
