"""The example of docs/ensemble.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/ensemble_page.py`` runs it: it starts its own
3-node ensemble with dynamic reconfiguration, so ``hosts`` is not used.
"""

from __future__ import annotations


def main(hosts: str) -> None:
    rolling_replacement()
    observers_first()


def rolling_replacement() -> None:
    # --8<-- [start:example]
    from zk_recipes import Lock, ZkClient
    from zk_recipes.testing import ZooKeeperCluster, wait_until

    with ZooKeeperCluster(3, reconfig=True) as cluster:  # reconfigEnabled=true
        originals = list(cluster.servers)
        # Given the three original servers, as a deployment's setting would.
        with ZkClient(cluster.connect_string, session_timeout=5.0) as zk:
            lock = Lock(zk, "/jobs/nightly")
            assert lock.acquire(timeout=10)
            session = zk.session_id

            new = [cluster.add_server(), cluster.add_server()]  # 3 -> 5
            for server in originals:  # then each original out, one at a time
                cluster.remove_server(server)  # reconfig -remove, then stopped

            # The client follows /zookeeper/config (each change is a watch event): it
            # knows only the new servers, and its session (the lock with it) lived on.
            def followed() -> bool:
                ports = {s.port for s in zk.ensemble.servers} if zk.ensemble else set()
                return ports == {m.port for m in new}

            wait_until(followed, "the new membership followed", 10)
            print(f"config version {zk.ensemble.version:x}: {zk.ensemble.hosts}")  # type: ignore[union-attr]
            assert zk.session_id == session
            wait_until(lock.is_held, "held for sure (in doubt while it changed servers)", 20)
            lock.release()
    # --8<-- [end:example]


def observers_first() -> None:
    # --8<-- [start:observers]
    from zk_recipes import ZkClient
    from zk_recipes.testing import ZooKeeperCluster, wait_until

    with ZooKeeperCluster(3, reconfig=True) as cluster:
        observer = cluster.add_server(observer=True)  # near the web tier, say
        voter = cluster.servers[0]
        with ZkClient(voter.connect_string, prefer_observers=True) as zk:
            zk.wait_ensemble(10)  # followed: the observers come first from the next attempt on
            session = zk.session_id
            voter.stop()  # its server goes: the client moves, to the observer

            def on_the_observer() -> bool:
                return zk.connected_address == (observer.host, observer.port)

            wait_until(on_the_observer, "connected to the observer", 20)
            assert zk.session_id == session  # the same session, its holds with it
            zk.create("/written-through-the-observer", b"forwarded to the leader")
            assert zk.get("/written-through-the-observer")[0] == b"forwarded to the leader"
    # --8<-- [end:observers]


if __name__ == "__main__":
    main("")
