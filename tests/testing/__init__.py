"""Tests of the real-ZooKeeper harness and its pytest plugin (``zk_recipes.testing``)."""
