"""Tests of the nodes family (``zk_recipes/_nodes/``): PersistentNode, GroupMember."""
