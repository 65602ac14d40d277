"""Tests of the ``zk-recipes`` command and its engine (``zk_recipes/cli/``)."""
