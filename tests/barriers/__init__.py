"""Tests of the barriers family (``zk_recipes/_barriers/``)."""
