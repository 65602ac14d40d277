"""Tests of the machinery the recipe families share (``zk_recipes/_internals/``).

The contender queue and hold validity.
"""
