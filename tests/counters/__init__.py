"""Tests of the counters family (``zk_recipes/_counters/``): SharedCount, AtomicLong."""
