"""The example of docs/recipes/tree-cache.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/tree_cache_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    from zk_recipes import TreeCache, ZkClient

    with ZkClient(hosts, namespace="myapp") as client:
        client.create("/flags/checkout", b"on", parents=True)
        with TreeCache(client, "/flags") as flags:
            flags.wait_initialized(10)
            flags.listen(lambda event: print(event.type.value, event.path))
            node = flags.get("/flags/checkout")  # a CachedNode(path, data, stat), or None
            names = flags.children("/flags")  # from an index: O(children)
            everything = flags.current()  # a consistent snapshot: {path: CachedNode}
            hidden = flags.unreadable  # nodes this client may not read (NoAuth): not cached
        client.delete("/flags", recursive=True)
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("tree-cache: ok")
