"""The example of docs/asyncio.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/asyncio_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations

from _stand_ins import Storage

storage = Storage()
report = "the nightly report"


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    # given: storage (your store), report (what you write to it)
    import asyncio

    from zk_recipes import ZkClient, aio

    async def nightly(zk: ZkClient) -> None:
        lock = aio.Lock(zk, "/locks/nightly-report")
        async with lock:  # waits as long as it takes, holding no thread
            storage.write(report, fencing_token=lock.fencing_token)

        if await lock.acquire(timeout=5):  # False if not acquired in 5 s
            try:
                lock.check()  # LockLost once the session is lost; never blocks
            finally:
                await lock.release()

        try:  # a cancelled wait (wait_for, asyncio.timeout) deletes its node first
            await asyncio.wait_for(lock.acquire(), timeout=5)
        except asyncio.TimeoutError:
            ...  # not acquired, and nothing of ours left in ZooKeeper
        else:
            await lock.release()

        stat = await zk.aio.exists("/locks/nightly-report")  # the client's own requests
        print("the lock's directory:", "gone (reaped when empty)" if stat is None else stat)

    with ZkClient(hosts, namespace="myapp") as zk:
        asyncio.run(nightly(zk))
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("asyncio: ok")
