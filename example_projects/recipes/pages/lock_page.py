"""The example of docs/recipes/lock.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/lock_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations

from _stand_ins import Storage

storage = Storage()
report = "the nightly report"


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    # given: storage (your store), report (what you write to it)
    from zk_recipes import Lock, ZkClient

    with ZkClient(hosts, namespace="myapp") as zk:
        lock = Lock(zk, "/locks/nightly-report")
        with lock:  # waits as long as it takes
            storage.write(report, fencing_token=lock.fencing_token)

        if lock.acquire(timeout=5):  # False if not acquired in 5 s
            try:
                ...
            finally:
                lock.release()

        with lock.acquired(timeout=5):  # raises LockTimeout instead
            ...
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("lock: ok")
