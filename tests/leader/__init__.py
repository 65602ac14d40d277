"""Tests of leader election (``zk_recipes/_leader/``): LeaderLatch, LeaderSelector."""
