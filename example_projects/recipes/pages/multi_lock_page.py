"""The example of docs/recipes/multi-lock.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/multi_lock_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations


class Ledger:
    def move(self, amount: int, source: str, target: str, fencing: dict[str, int]) -> None:
        assert len(fencing) == 2


ledger = Ledger()


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    # given: ledger (your books: moves take the locks' fencing tokens)
    from zk_recipes import Lock, MultiLock, ReadWriteLock, Semaphore, ZkClient

    with ZkClient(hosts, namespace="bank") as zk:
        transfer = MultiLock([Lock(zk, "/accounts/alice"), Lock(zk, "/accounts/bob")])
        with transfer.acquired(timeout=10):  # both, or LockTimeout (and neither held)
            tokens = transfer.fencing_tokens  # {"/accounts/alice": ..., ...}
            ledger.move(100, "alice", "bob", fencing=tokens)

        # Mixed members: a lock, a read lock and a lease.
        catalog = ReadWriteLock(zk, "/catalog")
        job = MultiLock(
            [Lock(zk, "/jobs/report"), catalog.read_lock, Semaphore(zk, "/db-slots", 8)]
        )
        with job.acquired(timeout=10):
            ...
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("multi-lock: ok")
