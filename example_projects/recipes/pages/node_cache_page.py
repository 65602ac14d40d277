"""The example of docs/recipes/node-cache.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/node_cache_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    from zk_recipes import NodeCache, ZkClient

    with ZkClient(hosts, namespace="myapp") as client:
        with NodeCache(client, "/config/rate-limit") as limit:
            limit.wait_initialized(10)
            limit.listen(lambda e: print(e.type.value, e.node and e.node.data))
            node = limit.current()  # a CachedNode, or None while the node does not exist
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("node-cache: ok")
