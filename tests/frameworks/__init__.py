"""Tests of the framework kit (``zk_recipes/frameworks/``) on its own; the faces test it too."""
