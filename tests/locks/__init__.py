"""Tests of the locks family (``zk_recipes/_locks/``).

With the one contract suite every lock-like runs (test_lock_contract.py).
"""
