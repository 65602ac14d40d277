"""The example of docs/recipes/atomic-long.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/atomic_long_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    from zk_recipes import AtomicLong, PromotedToLock, RetryNTimes, ZkClient

    with ZkClient(hosts, namespace="myapp") as zk:
        orders = AtomicLong(zk, "/counters/orders")
        result = orders.increment()
        if result.succeeded:
            print("order number", result.post)
        else:
            ...  # too much contention: nothing was written; try again later

        busy = AtomicLong(
            zk,
            "/counters/hits",
            retry_policy=RetryNTimes(3, 0.01),
            promote_to_lock=PromotedToLock("/locks/hits", RetryNTimes(3, 0.01), timeout=5),
        )
        busy.add(10)
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("atomic-long: ok")
