"""The example of docs/recipes/group-member.md, as the page shows it; the test suite runs it.

``python example_projects/recipes/pages/group_member_page.py`` runs it on a throwaway server.
"""

from __future__ import annotations


def main(hosts: str) -> None:
    # --8<-- [start:example]
    # given: hosts (your ensemble, "zk1:2181,zk2:2181,zk3:2181")
    from zk_recipes import GroupMember, MembershipChange, ZkClient

    def on_change(change: MembershipChange) -> None:  # runs on a thread of the member's own
        for member in change.joined:
            print("joined:", member, change.members[member])
        for member in change.left:
            print("left:", member)

    with ZkClient(hosts, namespace="myapp") as zk:
        me = GroupMember(zk, "/groups/workers", "worker-7", b"10.0.0.7")
        me.add_listener(on_change)
        with me:  # join ... leave
            me.wait_for_initial_create(timeout=10)
            peers = me.members()  # {"worker-7": b"10.0.0.7", "worker-3": b"..."}
            me.set_data(b"10.0.0.7 draining")
        assert "worker-7" in peers
    # --8<-- [end:example]


if __name__ == "__main__":
    from zk_recipes.testing import ZooKeeperServer

    with ZooKeeperServer() as server:
        main(server.connect_string)
    print("group-member: ok")
