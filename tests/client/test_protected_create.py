"""Protected creates after a lost reply: one node per create, whatever server answers the retry.

The retry first looks for the create's prefix. A server lagging behind the
leader may not have the unanswered create yet: the lookup syncs first, and
should two live nodes of one prefix exist anyway, the oldest is ours and the
other is deleted (an orphan of our live session would block a queue).
"""

from __future__ import annotations

from zk_recipes import CreateMode, ZkClient
from zk_recipes._paths import new_protected_id, protected_prefix
from zk_recipes.testing import wait_until


def test_two_live_nodes_of_one_protected_create_leave_one(zk_client: ZkClient) -> None:
    prefix = protected_prefix(new_protected_id())
    zk_client.create("/queue", b"")
    first = zk_client.create(f"/queue/{prefix}lock-", mode=CreateMode.EPHEMERAL_SEQUENTIAL)
    second = zk_client.create(f"/queue/{prefix}lock-", mode=CreateMode.EPHEMERAL_SEQUENTIAL)
    # The retry of a create whose reply was lost, after a lagging server said "not there".
    found = zk_client._creator.create_protected(
        zk_client._abs("/queue/lock-"),
        b"",
        CreateMode.EPHEMERAL_SEQUENTIAL,
        None,
        None,
        False,
        protected_id=prefix,
    )
    assert found.path == first.path
    wait_until(lambda: zk_client.exists(second.path) is None, "the second node deleted")
    assert zk_client.get_children("/queue") == [first.path.rsplit("/", 1)[1]]
    assert zk_client.wait_for_deletes(5)
