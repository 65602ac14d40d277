"""The example of docs/recipes/semaphore.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/semaphore_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations

from _stand_ins import Storage, work

storage = Storage()
chunk = b"..."
crawl = run_nightly_job = work


def next_site() -> str:
    return "https://example.org"


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    # given: crawl, next_site, run_nightly_job (your work), storage (your store), chunk (data)
    from zk_recipes import Semaphore, SemaphoreMutex, ZkClient

    with ZkClient(hosts, namespace="myapp") as zk:
        crawlers = Semaphore(zk, "/semaphores/crawlers", max_leases=5)

        with crawlers:  # one lease, as threading.Semaphore
            crawl(next_site())

        leases = crawlers.acquire_leases(3, timeout=10)  # three at once, or none
        if leases:
            try:
                for lease in leases:
                    storage.write(chunk, fencing_token=lease.fencing_token)
            finally:
                for lease in leases:
                    lease.close()

        nightly = SemaphoreMutex(zk, "/locks/nightly")
        with nightly.acquired(timeout=5):  # LockTimeout if not in 5 s
            run_nightly_job()
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("semaphore: ok")
