"""The example of docs/recipes/children-cache.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/children_cache_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    from zk_recipes import ChildrenCache, ChildrenStartMode, ZkClient

    with ZkClient(hosts, namespace="myapp") as client:
        workers = ChildrenCache(client, "/workers", mode=ChildrenStartMode.BUILD_INITIAL)
        workers.start(timeout=10)  # returns once loaded (this mode only)
        workers.listen(lambda e: print(e.type.value, e.path))
        for path, node in workers.current().items():  # the children, sorted by path
            print(path, node.data)
        first = workers.get("/workers/w-1")  # one child by its path, or None
        workers.close()
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("children-cache: ok")
