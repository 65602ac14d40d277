"""The example of docs/recipes/discovery.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/discovery_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    from zk_recipes import ServiceDiscovery, ServiceInstance, UriSpec, ZkClient

    with ZkClient(hosts, namespace="myapp") as client:
        with ServiceDiscovery(client, "/services") as discovery:
            spec = UriSpec("{scheme}://{address}:{port}")
            discovery.register(ServiceInstance(name="orders", port=8000, uri_spec=spec))
            instances = discovery.query_for_instances("billing")  # sorted by id
            with discovery.service_provider("billing").start(timeout=10) as billing:
                instance = billing.get_instance()  # round robin, from a cache
                url = instance.build_uri() if instance else None
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("discovery: ok")
