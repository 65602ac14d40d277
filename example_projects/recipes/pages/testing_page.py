"""The harness examples of docs/testing.md, as the page shows them; the test suite runs them.

``python example_projects/recipes/pages/testing_page.py`` runs them (they start their
own servers and a 3-node ensemble, so ``hosts`` is not used).
"""

from __future__ import annotations

from zk_recipes import ZkClient
from zk_recipes.testing import ZooKeeperServer


def main(hosts: str) -> None:
    standalone()
    with ZooKeeperServer() as zk:
        faults(zk)
        proxy_faults(zk)
        session_expiry(zk)
    ensemble()
    cut_follower()


def standalone() -> None:
    # --8<-- [start:standalone]
    from kazoo.client import KazooClient

    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as zk:  # starts; close() on exit
        client = KazooClient(zk.connect_string, timeout=2.0)  # "127.0.0.1:<port>"
        client.start()
        ...
        client.stop()
        client.close()
    # --8<-- [end:standalone]


def faults(zk: ZooKeeperServer) -> None:
    # --8<-- [start:faults]
    # given: zk (a ZooKeeperServer, started)
    zk.stop()  # SIGTERM and wait
    zk.kill()  # SIGKILL: a crash
    zk.start()  # again, same port, same data
    zk.restart()  # stop + start; restart(kill=True) crashes instead
    zk.pause()  # SIGSTOP: connections stay open, nothing answers
    zk.resume()  # SIGCONT: sessions whose deadline passed expire now
    zk.is_running, zk.is_paused, zk.is_serving()
    zk.wait_serving(timeout=30)
    zk.exit_status  # None while running; "exit code 14", "killed by SIGKILL" after

    zk.mode()  # "leader" (a quorum of one), "follower", or "standalone"
    zk.four_letter("mntr")  # any four-letter word, raw
    zk.session_ids()  # sessions the server knows, connected or not
    zk.tracked_session_ids()  # the same from its session tracker alone (no connections)
    zk.connected_session_ids()  # sessions connected to this server
    # --8<-- [end:faults]


def ensemble() -> None:
    # --8<-- [start:ensemble]
    from kazoo.client import KazooClient

    from zk_recipes.testing import ZooKeeperCluster

    with ZooKeeperCluster(size=3) as cluster:  # JVMs start in parallel; waits for a quorum
        client = KazooClient(cluster.connect_string, timeout=10.0)
        client.start()

        member = cluster.server_for_session(client.client_id[0])  # the server it uses
        assert member is not None
        member.kill()  # the client fails over, same session
        member.restart()
        cluster.wait_for_quorum(timeout=30)  # every running member serving, one leader

        cluster.leader().kill()  # a new leader is elected
        new_leader = cluster.wait_for_quorum()
        # --8<-- [end:ensemble]
        client.stop()
        client.close()
    assert new_leader is not None


def cut_follower() -> None:
    # --8<-- [start:cut_follower]
    from zk_recipes import ZkClient
    from zk_recipes.testing import ZooKeeperCluster

    with ZooKeeperCluster(size=3, sync_limit=20, quorum_proxies=True) as cluster:
        leader = cluster.wait_for_quorum()
        follower = next(m for m in cluster.servers if m is not leader)
        holder = ZkClient(follower.connect_string, session_timeout=4.0).start()
        ...
        cluster.isolate(follower)  # its clients still reach it; the quorum does not
        ...
        cluster.heal_quorum()
        cluster.wait_for_quorum()
        # --8<-- [end:cut_follower]
        holder.close()


def proxy_faults(zk: ZooKeeperServer) -> None:
    # --8<-- [start:proxy]
    # given: zk (a ZooKeeperServer, started)
    from kazoo.client import KazooClient

    proxy = zk.proxy()  # or TcpProxy("127.0.0.1", zk.port); closed with zk
    client = KazooClient(proxy.connect_string, timeout=6.0)

    proxy.cut()  # reset every connection now, and every new one: the client notices at once
    proxy.blackhole()  # a partition: bytes dropped both ways, closes not passed on;
    # the client times out on its own (kazoo: 2/3 of the session timeout),
    # the server keeps the session until *its* timeout
    proxy.drop_replies()  # one-way partition: requests (and pings) reach the server, replies
    # are lost: the server applies a create whose reply the client never sees
    proxy.drop_requests()  # the other way: the client's bytes are dropped, the server's delivered
    proxy.stall_replies()  # a server silent mid-reply: the client gets the length prefix and
    # half of the next reply, then nothing; its requests still reach the server
    proxy.heal()  # forward again; connections that lost bytes are reset so clients reconnect
    proxy.connections  # open client connections
    proxy.close()
    # --8<-- [end:proxy]
    client.close()


def session_expiry(zk: ZooKeeperServer) -> None:
    with ZkClient(zk.connect_string) as client:
        # --8<-- [start:expiry]
        # given: client (the session to expire: a ZkClient or a KazooClient)
        from zk_recipes.testing import expire_session, expire_session_locally

        expire_session(client)
        # --8<-- [end:expiry]
        assert expire_session_locally is not None


if __name__ == "__main__":
    main("")
    print("testing: ok")
