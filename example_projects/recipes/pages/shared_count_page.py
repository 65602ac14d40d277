"""The example of docs/recipes/shared-count.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/shared_count_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations


class Pool:
    def resize(self, size: int) -> None:
        self.size = size


pool = Pool()


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    # given: pool (your worker pool, resized to the shared count)
    from zk_recipes import SharedCount, ZkClient

    with ZkClient(hosts, namespace="myapp") as zk:
        with SharedCount(zk, "/config/max-workers", seed=4) as limit:
            limit.add_listener(lambda value: pool.resize(value))
            print(limit.get())

            limit.set(8)  # unconditional

            while True:  # compare-and-set loop
                current = limit.versioned()
                if limit.try_set(current, current.value + 1):
                    break
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("shared-count: ok")
