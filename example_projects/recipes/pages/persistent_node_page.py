"""The example of docs/recipes/persistent-node.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/persistent_node_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations

from _stand_ins import work

alert = serve_forever = work


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    # given: alert, serve_forever (your work)
    from zk_recipes import PersistentNode, PersistentNodeEvent, PersistentNodeState, ZkClient

    def announce(event: PersistentNodeEvent) -> None:  # runs on a thread of the node's own
        if event.state is PersistentNodeState.CONFLICT:
            alert(f"{event.path} is held by session {event.owner:#x}")

    with ZkClient(hosts, namespace="myapp") as zk:
        node = PersistentNode(zk, "/services/api/host-1", b"10.0.0.7:8080")
        node.add_listener(announce)
        with node:  # start() ... close()
            if not node.wait_for_initial_create(timeout=10):
                raise SystemExit("not registered within 10 s")
            serve_forever()
            node.set_data(b"10.0.0.7:8081")  # the node, and every re-create, gets it
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("persistent-node: ok")
