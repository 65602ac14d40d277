"""The example of docs/recipes/barrier.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/barrier_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations

from _stand_ins import work

publish_config = compute_my_share = work


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    # given: publish_config, compute_my_share (your work)
    import threading

    from zk_recipes import Barrier, DoubleBarrier, ZkClient

    with ZkClient(hosts, namespace="myapp") as zk:
        # The coordinator holds everyone until the new config is published.
        gate = Barrier(zk, "/barriers/config-ready")
        gate.set_barrier()
        publish_config()
        gate.remove_barrier()

        # A worker, elsewhere:
        if not Barrier(zk, "/barriers/config-ready").wait(timeout=60):
            raise SystemExit("config never published")

        # Five workers compute a step together (here: five threads).
        def worker() -> None:
            step = DoubleBarrier(zk, "/barriers/step", member_qty=5)
            with step.entered(timeout=30):  # ZkTimeoutError if not all in (or out) in time
                compute_my_share()

        threads = [threading.Thread(target=worker) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("barrier: ok")
