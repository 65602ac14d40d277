"""The example of docs/recipes/leader-latch.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/leader_latch_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations

from _stand_ins import Storage, work

storage = Storage()
plan = "the plan"
start_publishing = stop_publishing = work


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    # given: start_publishing, stop_publishing (your work), storage (your store), plan (its data)
    from zk_recipes import LeaderLatch, ZkClient

    class Scheduler:  # a LeaderLatchListener
        def is_leader(self) -> None:
            start_publishing()

        def not_leader(self) -> None:
            stop_publishing()

    with ZkClient(hosts, namespace="myapp") as zk:
        with LeaderLatch(zk, "/elections/scheduler", "host-a") as latch:  # start() .. close()
            latch.add_listener(Scheduler())
            if latch.await_leadership(timeout=30):  # False on timeout
                storage.write(plan, fencing_token=latch.fencing_token)
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("leader-latch: ok")
