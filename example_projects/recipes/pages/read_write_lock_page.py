"""The example of docs/recipes/read-write-lock.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/read_write_lock_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations

from _stand_ins import Storage, work

storage = Storage()
new_catalog = ["a", "b"]
verify = work


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    # given: storage (your store), new_catalog, verify (your data and check)
    from zk_recipes import ReadWriteLock, ZkClient

    with ZkClient(hosts, namespace="myapp") as zk:
        rw = ReadWriteLock(zk, "/locks/catalog")

        with rw.read_lock:  # shared with other readers
            catalog = storage.read()

        with rw.write_lock.acquired(timeout=10):  # exclusive; LockTimeout if not in 10 s
            storage.write(new_catalog, fencing_token=rw.write_lock.fencing_token)

        # Downgrade: finish writing, keep reading, let no other writer in between.
        with rw.write_lock:
            storage.write(new_catalog)
            rw.read_lock.acquire()  # granted at once
        try:
            verify(storage.read())  # other readers may join now
        finally:
            rw.read_lock.release()
        assert catalog is None or catalog == new_catalog
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("read-write-lock: ok")
