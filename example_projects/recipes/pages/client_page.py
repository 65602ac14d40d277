"""The examples of docs/client.md, as the page shows them; the test suite runs them.

``python example_projects/recipes/pages/client_page.py`` runs them on a throwaway server.
"""

from __future__ import annotations


def resync() -> None:
    """Your code: read again what the watch covers (here: nothing to do)."""


def main(hosts: str) -> None:
    first_steps(hosts)
    process_client(hosts)
    transaction(hosts)
    as_holder(hosts)
    persistent_watch(hosts)


def first_steps(hosts: str) -> None:
    # --8<-- [start:first_steps]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    from zk_recipes import CreateMode, ZkClient

    with ZkClient(hosts, namespace="myapp", session_timeout=10) as zk:
        zk.create("/jobs/nightly", b"", parents=True)
        node = zk.create(
            "/workers/w-", mode=CreateMode.EPHEMERAL_SEQUENTIAL, parents=True, protected=True
        )
        print(node.path, node.stat.czxid)
    # --8<-- [end:first_steps]


def process_client(hosts: str) -> None:
    # --8<-- [start:process_client]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    from zk_recipes import ClientSettings, ProcessClient

    clients = ProcessClient(lambda: ClientSettings(hosts=hosts))
    clients.start_in_background()  # e.g. in a post-fork hook that must return fast
    zk = clients.get(timeout=10)  # this process's connected ZkClient, made on first use
    clients.close()  # at shutdown: our ephemeral nodes go at once
    # --8<-- [end:process_client]
    assert zk.session_id


def transaction(hosts: str) -> None:
    from zk_recipes import CreateResult, ZkClient

    with ZkClient(hosts, namespace="txdemo") as client:
        client.create("/config", b"old", parents=True)
        for _ in range(7):  # the page's transaction expects /config at version 7
            client.set("/config", b"old")
        client.create("/jobs/old", parents=True)
        # --8<-- [start:transaction]
        # given: client (a ZkClient; /config is at version 7, /jobs/old exists)
        from zk_recipes import CreateMode

        tx = client.transaction()
        tx.check("/config", version=7)
        tx.create("/jobs/j-", b"...", mode=CreateMode.PERSISTENT_SEQUENTIAL)
        tx.set("/config", b"new", version=7)
        tx.delete("/jobs/old")
        results = tx.commit()  # all or none; one result per operation
        created = results[1]  # a CreateResult: .path, .stat

        with client.transaction() as tx:  # or: committed when the block ends
            tx.set("/config", b"newer")
        # --8<-- [end:transaction]
        assert isinstance(created, CreateResult)
        assert created.path.startswith("/jobs/j-")
        client.delete("/jobs", recursive=True)
        client.delete("/config")


def as_holder(hosts: str) -> None:
    from zk_recipes import ZkClient

    with ZkClient(hosts, namespace="holderdemo") as client:
        client.create("/jobs/job-1", b"work", parents=True)
        client.ensure_path("/jobs/locks")
        # --8<-- [start:as_holder]
        # given: client (a ZkClient; /jobs/job-1 and the directory /jobs/locks exist)
        from zk_recipes import CreateMode

        made = client.create("/jobs/locks/job-1", b"", mode=CreateMode.EPHEMERAL).stat
        owner = made.ephemeral_owner  # the session that made it: its holder
        client.set("/jobs/locks/job-1", b"progress", session=owner)
        tx = client.transaction(session=owner)  # sent only while that session is ours
        tx.check("/jobs/locks/job-1", 1).delete("/jobs/job-1").delete("/jobs/locks/job-1")
        tx.commit()  # else HolderSessionLost: nothing sent, nothing applied
        # --8<-- [end:as_holder]
        assert client.exists("/jobs/job-1") is None
        client.delete("/jobs", recursive=True)


def persistent_watch(hosts: str) -> None:
    from zk_recipes import ZkClient

    with ZkClient(hosts, namespace="myapp") as client:
        # --8<-- [start:persistent_watch]
        # given: client (a ZkClient), resync (your code: read again what the watch covers)
        import queue

        from zk_recipes import WatchEvent

        events: queue.SimpleQueue[WatchEvent] = queue.SimpleQueue()
        watch = client.add_watch("/config", events.put, on_established=lambda w: resync())
        ...
        watch.remove()
        # --8<-- [end:persistent_watch]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("client: ok")
